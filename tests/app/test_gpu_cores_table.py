"""The GPU vs TPU page's CUDA cores and Tensor Cores table (a seed-note topic; data/gpu_cores.csv): the seed's
figures on the page, each FP32 rate worked out as 2 x cores x clock, and the tensor figure the speeds use beside it."""

from core.catalog.accelerators import get_accelerator

from .conftest import no_exception, open_link


def test_the_cores_table_shows_the_seeds_figures_and_the_two_rates():
    at = open_link("gpu_vs_tpu", {"model": "llama-3.1-8b"})
    no_exception(at)
    assert any(e.label.startswith("CUDA cores and Tensor Cores") for e in at.expander)
    table = next(d.value for d in at.dataframe if "CUDA cores" in d.value.columns)
    rows = table.set_index("GPU")
    assert rows.loc[get_accelerator("k80").name, "CUDA cores"] == 2496
    assert rows.loc[get_accelerator("t4").name, "CUDA cores"] == 2560
    a100 = rows.loc[get_accelerator("a100-sxm-80gb").name]
    assert (a100["CUDA cores"], a100["Tensor Cores"]) == (6912, 432)
    assert a100["FP32 TFLOP/s (2 x cores x clock)"] == round(2 * 6912 * 1410e6 / 1e12, 1) == 19.5
    assert a100["16-bit tensor TFLOP/s (dense)"] == 312 and a100["Tensor / FP32"] == 16.0


def test_parts_that_cannot_train_the_scenario_are_said_once_per_reason():
    """Review (stop 48): with DPO the TPUs left the chart without a word. The page says each reason once, with the
    parts it leaves out (core/money/compare.ComparisonRow.training_problem, the planner's rule)."""
    at = open_link("gpu_vs_tpu", {"model": "llama-3.1-8b", "mode": "training", "method": "lora", "obj": "dpo"})
    no_exception(at)
    said = [str(c.value).replace("\\", "") for c in at.caption if "Not on the chart" in str(c.value)]
    assert len(said) == 1 and said[0].count("has no DPO trainer") == 1, said
    assert "Google Cloud TPU v5e" in said[0] and "AWS Inferentia2" in said[0] and "an inference-only part" in said[0]
