"""core/ is pure Python: no Streamlit anywhere in it."""

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"


def test_no_streamlit_import_in_core_source():
    for path in CORE.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] == "streamlit" for n in names), f"{path.name} imports streamlit"


def test_importing_core_does_not_load_streamlit():
    code = "import sys, core.estimate, core.cli; sys.exit('streamlit' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=CORE.parent).returncode == 0
