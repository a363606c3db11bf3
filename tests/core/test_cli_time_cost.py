"""`python -m core estimate` prints the training and inference blocks (issue 3 interface)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_estimate(tmp_path, capsys):
    def run(payload):
        path = tmp_path / "scenario.json"
        path.write_text(json.dumps(payload))
        return main(["estimate", str(path)]), capsys.readouterr()

    return run


def test_inference_block(run_estimate):
    code, out = run_estimate({"model": "llama-3.1-8b", "seq_len": 8192, "batch_size": 8})
    assert code == 0
    res = json.loads(out.out)
    inf = res["inference"]
    for key in ("time_to_first_token_s", "decode_tokens_per_s", "max_concurrent_sequences", "usd_per_million_tokens"):
        assert key in inf
    assert inf["max_concurrent_sequences"] == res["max_batch_size"]
    assert inf["decode_tokens_per_s"] > 0 and inf["usd_per_million_tokens"] > 0
    assert res["training"] is None


def test_training_block(run_estimate):
    code, out = run_estimate({"model": "llama-2-70b", "mode": "training", "train_tokens": 2e12, "accelerator": "a100-sxm-80gb", "zero_stage": 3, "data_parallel": 2048})
    assert code == 0
    res = json.loads(out.out)
    tr = res["training"]
    for key in ("flops", "gpu_hours", "wall_hours", "cost_usd"):
        assert key in tr
    # Llama 2 paper Table 2: 1,720,320 A100 hours, a recorded miss (tests/data/training_runs.csv, docs/CLUSTER.md).
    # `gpu_hours` is the uninterrupted computation: -32%, the per-token model's gap (0.65 MFU modelled, about 0.44
    # implied). With the cluster-scale losses (wall_hours_with_comm): on this layout (FSDP over 2,048 GPUs, one
    # sequence each) the weight gathers and the gradient reduce-scatter hide under compute, and interruptions at
    # 2,048 GPUs add 1.3% (Llama 3's rate, core/speed/comm.py): -31%. At Llama 2's stated TP 8 layout the row is -22%.
    assert tr["gpu_hours"] == pytest.approx(1_720_320 * (1 - 0.32), rel=0.05)
    assert tr["comm_overhead_fraction"] == pytest.approx(0.0127, abs=0.001)
    assert tr["wall_hours_with_comm"] * 2048 == pytest.approx(1_720_320 * (1 - 0.313), rel=0.01)
    assert res["inference"] is None
    # 2,048 A100s are more than any provider's on-demand order (data/providers.csv's max_devices): no on-demand price
    assert tr["cost_usd"] is None and tr["run_usd"] is None and any("on-demand" in a for a in tr["assumptions"])


def test_no_training_block_without_tokens(run_estimate):
    code, out = run_estimate({"model": "gpt2", "mode": "training"})
    assert code == 0 and json.loads(out.out)["training"] is None


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ('{"model": "gpt2", "train_tokens": 0}', "train_tokens"),
        ('{"model": "gpt2", "train_tokens": -5}', "train_tokens"),
        ('{"model": "gpt2", "mfu": 1.5}', "mfu"),
        ('{"model": "gpt2", "mfu": "fast"}', "mfu"),
    ],
)
def test_bad_time_inputs_exit_2_with_one_line(payload, needle):
    proc = subprocess.run([sys.executable, "-m", "core", "estimate", "-"], input=payload, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]
