"""MLX on Apple silicon in the app (issues #27, #29): a link with engine=mlx round-trips, the Memory and Inference
pages say what the GPU may use of the unified memory (macOS's wired-memory limit) and, where it is the default limit
and not the memory that is short, the sysctl that raises it; MLX on hardware it does not run on is one line."""

from tests.app.conftest import no_exception, open_link, run_app

APPLE = {"model": "llama-3.3-70b", "acc": "apple-m4-max-48gb", "engine": "mlx", "fmt": "mlx-q4", "seq": "2048"}


def _texts(at) -> str:
    return " ".join([c.value for c in at.caption] + [m.value for m in at.markdown] + [e.value for e in at.error]).replace("\\", "")


def test_memory_page_names_the_wired_limit_and_the_sysctl_that_raises_it():
    at = run_app("memory", APPLE)
    no_exception(at)
    text = _texts(at)
    assert "macOS's GPU wired-memory limit" in text and "36.0 GiB of its 48.0 GiB" in text
    # 38.4 GiB needed, rounded up to 39 GiB (39,936 MiB); 40,960 while a 0.75 GiB CUDA context was counted on a Mac
    assert "iogpu.wired_limit_mb=39936" in text
    assert at.query_params["engine"] in ("mlx", ["mlx"]) and at.query_params["fmt"] in ("mlx-q4", ["mlx-q4"])


def test_inference_page_with_mlx_on_an_m3_max():
    at = run_app("inference", APPLE | {"acc": "apple-m3-max-64gb"})
    no_exception(at)
    assert "48.0 GiB of its 64.0 GiB" in _texts(at)


def test_mlx_on_an_amd_part_is_one_line():
    at = open_link("memory", APPLE | {"acc": "mi300x"})
    no_exception(at)
    lines = [t for t in (e.value for e in [*at.error, *at.warning]) if "mlx does not run on" in t]
    assert len(lines) == 1 and "\n" not in lines[0].strip()


def test_the_wired_limit_command_reads_as_written_on_the_memory_page():
    """The advice names `sudo sysctl iogpu.wired_limit_mb=N`, a command a reader copies: its underscores must not
    turn into emphasis (they did: 'iogpu.wired limit mb'). Markdown shows an escaped underscore as itself."""
    from app_pages.shared.text import plain

    assert plain("iogpu.wired_limit_mb=40960") == "iogpu\\.wired\\_limit\\_mb=40960"
    at = run_app("memory", {"model": "llama-3.3-70b", "acc": "apple-m4-max-48gb", "engine": "mlx", "fmt": "mlx-q4"})
    no_exception(at)
    lines = [m.value for m in at.markdown if "sysctl" in m.value]
    assert lines and all("iogpu\\.wired\\_limit\\_mb=" in v for v in lines), lines


def test_vllm_on_a_mac_is_one_line_that_names_its_metal_plugin():
    """vLLM reaches Apple GPUs only through the community vllm-metal plugin (mlx-lm's model layers): the Inference
    page says so in one line and points to MLX, instead of "vLLM does not run on" the Mac."""
    at = open_link("inference", {"model": "llama-3.1-8b", "acc": "apple-m2-max", "engine": "vllm"})
    no_exception(at)
    lines = [t.replace("\\", "") for t in (e.value for e in [*at.error, *at.warning]) if "does not run on" in t]
    assert len(lines) == 1 and "\n" not in lines[0].strip(), lines
    assert "vllm-metal" in lines[0] and "choose mlx" in lines[0], lines


def test_memory_page_names_the_metal_runtime_on_a_mac():
    """The Explain table names the runtime the part runs: Metal on Apple silicon, with nothing counted for it."""
    at = run_app("memory", {"model": "llama-3.1-8b", "acc": "apple-m4-max", "engine": "mlx", "fmt": "mlx-q4"})
    no_exception(at)
    text = _texts(at) + " ".join(str(t.value) for t in at.table) + " ".join(str(d.value) for d in at.dataframe)
    assert "Runtime (Metal)" in text and "Runtime (CUDA context" not in text
    assert "CUDA context" not in text and "NCCL" not in text
