"""``deepfield setup``: wire deepfield's MCP server (and standing instructions) into the
configuration of the agents people use, without disturbing anything else in those files.

    from deepfield.agentsetup import AGENTS, Host, apply, get_agent, plan_setup

    agent = get_agent("cursor")
    plan = plan_setup(agent, ["deepfield", "--store", "/home/me/memory", "mcp"],
                      host=Host.current(), project=Path.cwd())
    print(plan.changes[0].diff())      # what would change (nothing is written yet)
    apply(plan)                        # backups, then atomic writes
"""

from __future__ import annotations

from .agents import AGENTS, PROJECT, USER, Agent, Host, get_agent
from .plan import DEFAULT_SERVER_NAME, FileChange, SetupPlan, apply, plan_setup, snippet

__all__ = ["AGENTS", "DEFAULT_SERVER_NAME", "PROJECT", "USER", "Agent", "FileChange", "Host",
           "SetupPlan", "apply", "get_agent", "plan_setup", "snippet"]
