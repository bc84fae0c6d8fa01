"""REPORT.src.md + out_*.md -> REPORT.md (replaces '<!-- include FILE -->' lines by the file)."""
import os
import re
here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, "REPORT.src.md")).read()
out = re.sub(r"<!-- include (\S+) -->",
             lambda m: open(os.path.join(here, m.group(1))).read().strip(), src)
open(os.path.join(here, "REPORT.md"), "w").write(out)
print("wrote REPORT.md", len(out), "chars")
