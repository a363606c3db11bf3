"""Folded sections (app_pages/shared/fold.py): drawn only while open. The app's tests open every fold before a page runs
(tests/app/conftest.py open_folds), so what a fold holds is checked as before; these check the folds themselves."""

from __future__ import annotations

from .conftest import no_exception, open_link


def elements(block) -> int:
    """Elements drawn under a block, nested blocks walked."""
    return sum(elements(c) if hasattr(c, "children") else 1 for c in block.children.values())


def test_every_fold_starts_closed_and_opens_on_the_page():
    """The folds the app's tests open (app_pages/shared/fold.KEYS) are the app's: each starts closed on a plain link,
    and opened it draws more elements on its page."""
    from app_pages.shared.fold import KEYS

    pages = {
        "fold_prices": "memory",
        "fold_scheduler": "inference",
        "fold_inference_how": "inference",
        "fold_inference_launch": "inference",
        "fold_training_launch": "training",
        "fold_training_how": "training",
        "fold_box_how": "inference",
    }
    assert set(pages) == set(KEYS)
    for key, page in pages.items():
        link = {"model": "llama-3.1-8b"} | ({"mode": "training"} if page == "training" else {}) | ({"box1": "2"} if key == "fold_box_how" else {})
        at = open_link(page, link, folds=None)
        closed = elements(at.main) + elements(at.sidebar)
        at.session_state[key] = True
        at.run()
        no_exception(at)
        assert elements(at.main) + elements(at.sidebar) > closed, key


def test_a_fold_outside_the_list_is_refused():
    """A new fold must join fold.KEYS, or the app's tests would never see what it holds."""
    import pytest

    from app_pages.shared.fold import folded

    with pytest.raises(ValueError, match=r"fold\.KEYS"):
        folded("Anything", "fold_not_listed")
