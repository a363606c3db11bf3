"""From plan to launch (issue #27, part 5): the shell command, and for trainers the config file, that runs a plan.

`launch_command(plan)` turns a Plan (or its scenario dict) into text to paste into a shell: comments that say what
the plan is and what to replace, `cat > FILE <<'LAUNCH_EOF'` blocks that write a trainer's config, and the command.
Every flag and config key it writes is in data/launch_flags.csv with the documentation page it comes from; a test
(tests/core/test_launch.py) holds each generated command to that table and to the plan's values.

Safety: anything that can come from a user (a model name or path, a config's `_name_or_path`, a provider or instance
name from a user's price list) is `shlex.quote`d on a command line, JSON-encoded inside a config file or a Python
literal (never a raw newline, so no line of a config can close its quoted here-document early), and stripped of
control characters in a comment (a newline would end the comment and start a command)."""

from __future__ import annotations

from typing import Any

from core.plan.launch.facts import GPTQ_PLACEHOLDER, HEREDOC_END, PLACEHOLDER_MODEL, _Facts
from core.plan.launch.serve import _serving
from core.plan.launch.train import _training

__all__ = ["GPTQ_PLACEHOLDER", "HEREDOC_END", "PLACEHOLDER_MODEL", "launch_command"]


def launch_command(plan_or_scenario: Any) -> str:
    """The text that runs a plan (a core.plan.result.Plan, or its `scenario` dict): comments, any config file written
    by a here-document, then the command. Pure: reads the catalogs, writes nothing."""
    p = _Facts.of(plan_or_scenario)
    if p.serving:
        return _serving(p)
    return _training(p)
