"""What the training objective changes (the scenario's `objective`): supervised fine-tuning (SFT) against Direct
Preference Optimization (DPO; Rafailov et al. 2023, "Direct Preference Optimization: Your Language Model is Secretly a
Reward Model", arXiv 2305.18290, Sec. 4: the loss compares the policy's log-probabilities of a chosen and a rejected
response with a frozen reference model's).

- Two sequences an example. A DPO example is a prompt with a chosen and a rejected response; the trainers run both
  through the policy as one batch (TRL's DPOTrainer.concatenated_forward, huggingface/trl trl/trainer/dpo_trainer.py;
  torchtune's DPO recipes concatenate chosen and rejected the same way, recipes/lora_dpo_single_device.py). A
  micro-batch of `batch_size` pairs holds 2 x batch_size sequences of activations and logits, and the scenario's
  `train_tokens` counts the tokens of both responses (each with its prompt), as the trainers process them.
- A frozen reference model. A full fine-tune keeps a second copy of the weights, as the policy was loaded (TRL copies
  the model when no ref_model is given; torchtune's full_dpo_distributed loads ref_checkpointer's), sharded like the
  policy's under ZeRO-3 / FSDP and replicated otherwise (TRL prepares it with ZeRO-3 when the run is ZeRO-3, else
  ZeRO-0). LoRA's and QLoRA's reference is the same base with the adapters switched off (TRL with a PEFT model,
  torchtune's disable_adapter): no second copy.
- The reference's forward pass: one more forward a step, with no gradients: 2N FLOPs a token (N the active parameters;
  Kaplan et al. 2020, arXiv 2001.08361, Sec. 2.1), so a full fine-tune's 6N becomes 8N, 4/3 of SFT's compute per token.
  TRL runs it after the policy's forward, while the policy's activations and logits are held
  (DPOTrainer.get_batch_loss_metrics: concatenated_forward, then compute_ref_log_probs), so the loss step holds the
  reference's 16-bit logits too.

Not modelled: TRL's precompute_ref_log_probs (a pass over the data before training, then no reference in memory)."""

from __future__ import annotations

from core.scenario import Scenario

SEQUENCES_PER_EXAMPLE = {"sft": 1, "dpo": 2}
OBJECTIVE_LABELS = {"sft": "Supervised fine-tuning (SFT)", "dpo": "Preference tuning (DPO)"}


def preference(sc: Scenario) -> bool:
    """A DPO training run (the objective only shapes training)."""
    return sc.mode == "training" and sc.objective == "dpo"


def sequences_per_example(sc: Scenario) -> int:
    """Sequences one example of the micro-batch runs through the policy: 2 for a DPO pair, else 1."""
    return SEQUENCES_PER_EXAMPLE[sc.objective] if sc.mode == "training" else 1


def micro_batch_tokens(sc: Scenario) -> int:
    """Tokens one micro-batch runs through the policy on a data-parallel rank."""
    return sc.batch_size * sequences_per_example(sc) * sc.seq_len


def reference_forward_passes(sc: Scenario) -> int:
    """Forward passes a step adds for the reference model (no gradients): 1 for DPO, else 0."""
    return 1 if preference(sc) else 0


def reference_copy(sc: Scenario) -> bool:
    """The reference is a second copy of the weights (a full fine-tune's DPO), not the base with adapters off."""
    return preference(sc) and sc.method == "full"


def preference_note(sc: Scenario) -> str | None:
    """What DPO adds to the scenario, in one sentence (the Memory page and the estimate's assumptions), or None."""
    if not preference(sc):
        return None
    pairs = f"{sc.batch_size:,} pair" + ("s" if sc.batch_size > 1 else "")
    reference = (
        "a frozen reference copy of the weights, as loaded and sharded like them"
        if reference_copy(sc)
        else "the reference is the base with the adapters off (no second copy)"
    )
    return (
        f"DPO: a micro-batch of {pairs} runs {sc.batch_size * sequences_per_example(sc):,} sequences (a chosen and a rejected answer each); {reference}; "
        "a reference forward pass a step with no gradients, its logits held at the loss (TRL's DPOTrainer, torchtune's DPO recipes)"
    )
