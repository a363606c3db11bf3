"""What one session keeps in st.session_state, entry by entry (issue #25: memory that stays bounded).

AppTest opens a page on the worst link of bench/abuse.py (a config.json at the link budget, a Compare set of four
scenarios with configs, and with --prices a price list at its budget, all unique), runs it --runs times, and weighs
every session-state entry with the app's cache ledger's measure (app_pages/shared/cache.weight_bytes: every object
reachable from the value, once, by sys.getsizeof; the shared catalogs left out). Objects several entries share are
counted in each. Prints the total and the heaviest entries, in kB (1,000 bytes).

    python3 bench/session_state.py [--page compare] [--prices] [--runs 2] [--top 8]
    python3 bench/session_state.py --root /path/to/old/checkout     # the same for another version
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--page", default="compare", help="a page's url_path (compare, memory, inference, training, ...)")
    ap.add_argument("--prices", action="store_true", help="a price list at its budget in the link too")
    ap.add_argument("--runs", type=int, default=2, help="whole runs on the link (the first opens it)")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    root = args.root.resolve()
    # the link, made by this checkout's bench/abuse.py in a process of its own: --root's modules stay --root's
    made = f"import json, sys; sys.path.insert(0, 'bench'); from abuse import worst_link; print(json.dumps(worst_link(1, prices={args.prices})))"
    link = json.loads(subprocess.check_output([sys.executable, "-c", made], cwd=Path(__file__).resolve().parent.parent, text=True))
    os.chdir(root)
    sys.path.insert(0, str(root))

    from streamlit.testing.v1 import AppTest
    from streamlit.util import calc_hash

    from app_pages.shared.cache import weight_bytes

    at = AppTest.from_file(str(root / "app.py"), default_timeout=300)
    at.context = {"url": f"http://localhost:8501/{args.page}"}
    for key, value in link.items():
        at.query_params[key] = value[0]
    at._page_hash = calc_hash(args.page)  # a deep link, as tests/app/conftest.open_link opens one
    for _ in range(max(1, args.runs)):
        at.run()
    if at.exception:
        raise SystemExit(f"the page failed: {[e.value for e in at.exception]}")
    sizes = sorted(((weight_bytes(value), key) for key, value in at.session_state.items()), reverse=True)
    print(f"{args.page}{' +prices' if args.prices else ''}: {len(sizes)} entries, {sum(s for s, _ in sizes) / 1e3:,.1f} kB")
    for size, key in sizes[: args.top]:
        print(f"  {size / 1e3:9,.1f} kB  {key}")


if __name__ == "__main__":
    main()
