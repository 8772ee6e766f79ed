"""The exercise path: every exercise's place, rating, time guide and hints. The statement is the
docstring of the solution (exercises/solutions/), the template (exercises/part*.py) is generated from
it (exercises/build.py), and the check lives in exercises/cases/<section>.py (run by exercises/checks.py).
Imports nothing heavy."""
from __future__ import annotations

import ast
import functools
import importlib
from dataclasses import dataclass
from pathlib import Path

SECTIONS = {  # module name -> title, in the order of the path
    "part1_attention": "Part 1: the task and attention patterns",
    "part2_circuits": "Part 2: circuits and ablations",
    "part3_causal": "Part 3: the logit lens, attribution, patching and detectors",
    "part4_training": "Part 4: training and the drop",
    "part5_markov": "Part 5: Markov chains and statistical induction heads",
}
# Part 5 checks on a Markov-chain model: the picked one when it is of that task, else this shipped run
# (exercises/engine.py); parts 1-4 check on a model of the repeat task and refuse a Markov-chain one.
MARKOV_SECTION = "part5_markov"
MARKOV_MODEL = "checkpoints/markov/markov-2block.pt"


@dataclass(frozen=True)
class Exercise:
    name: str  # the function the student writes
    section: str  # a key of SECTIONS
    title: str
    page: str  # the page file where the result is on screen
    difficulty: int  # 1-5
    importance: int  # 1-5
    minutes: int  # time guide
    hints: tuple[str, ...]

    def statement(self) -> str:
        """The solution's docstring: what to compute, shapes and conventions."""
        return ast.get_docstring(_solution_node(self)) or ""

    def solution(self) -> str:
        """The solution's source code."""
        node = _solution_node(self)
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        return "".join(solution_text(self.section).splitlines(keepends=True)[first - 1:node.end_lineno])


def solution_function(ex: Exercise):
    return getattr(importlib.import_module(f"exercises.solutions.{ex.section}"), ex.name)


@functools.cache
def solution_text(section: str) -> str:
    """The source of a section's solutions, read as text: the Exercises page shows it without importing the
    module, which imports torch (a reading server never does)."""
    return (Path(__file__).resolve().parent / "solutions" / f"{section}.py").read_text()


@functools.cache
def _solution_functions(section: str) -> dict[str, ast.FunctionDef]:
    """The section's solution functions by name, parsed once per process."""
    from core.ast_parse import parse

    return {n.name: n for n in parse(solution_text(section)).body if isinstance(n, ast.FunctionDef)}


def _solution_node(ex: Exercise) -> ast.FunctionDef:
    return _solution_functions(ex.section)[ex.name]


def rating(n: int, filled: str) -> str:
    return filled * n + "⚪" * (5 - n)


P1, P2, P3, P4, P5 = SECTIONS
EXERCISES = (
    Exercise("tile_patterns", P1, "A repeated-sequence batch", "app_pages/train.py", 1, 3, 5, (
        "`torch.arange(seq_len) % periods[:, None]` gives, for each sequence, which pattern entry sits at "
        "each position.",
        "`patterns.gather(1, positions)` picks those entries row by row.")),
    Exercise("later_copy_mask", P1, "The mask of later-copy targets", "app_pages/train.py", 1, 4, 5, (
        "The columns are targets t = 1, ..., T-1: build `t = torch.arange(1, seq_len)`.",
        "Compare with `periods[:, None]` so that the comparison broadcasts to [B, T-1].")),
    Exercise("causal_pattern", P1, "A causal attention pattern with rotary positions", "app_pages/attention.py",
             2, 5, 15, (
        "Rotate first, then score: `apply_rope(q, cos, sin) @ apply_rope(k, cos, sin).transpose(-1, -2)`.",
        "Mask with `torch.ones(T, T, dtype=torch.bool).triu(1)` (the keys after the query) set to -inf, then "
        "`softmax(-1)` over the keys.")),
    Exercise("prev_token_score", P1, "The previous-token score", "app_pages/attention.py", 1, 4, 5, (
        "The entries A[i, i-1] form the diagonal just below the main one: `pattern.diagonal(-1, dim1=-2, dim2=-1)`.",
        "That diagonal has T - 1 entries, one per query i >= 1: average it over the batch and those queries.")),
    Exercise("induction_score", P1, "The induction score (latest copy)", "app_pages/attention.py", 2, 5, 10, (
        "Loop over the sequences: each has its own L. For queries i = L..T-1 the keys are i + 1 - L.",
        "`pattern[b][:, i, i + 1 - L]` with index tensors i picks one entry per query for every head; sum them "
        "and count the queries, then divide once at the end.")),
    Exercise("induction_any_score", P1, "The induction score (any copy)", "app_pages/attention.py", 2, 4, 10, (
        "For one query i the keys i + 1 - L, i + 1 - 2L, ... down to 0 are `range(i + 1 - L, -1, -L)`.",
        "Sum over those keys (not an average), then average the sums over the queries i >= L of every sequence.")),
    Exercise("hooked_induction_scores", P1, "Writing a hook: induction scores stored during a forward",
             "app_pages/attention.py", 2, 4, 15, (
        "A hook is a function of the activation that returns it: `def hook(pattern): scores[l] = ...; return "
        "pattern`. Build one per block in a small factory, `def store(l): def hook(pattern): ...; return hook`.",
        "The body is induction_score's computation; `torch.stack([scores[l] for l in range(model.cfg.n_layers)])` "
        "gives the rows in block order.")),
    Exercise("ov_copying_matrix", P2, "The OV copying matrix", "app_pages/circuits.py", 1, 5, 5, (
        "Follow a token through the head: its embedding row, the value map, the output map, then the "
        "unembedding W_E^T.",)),
    Exercise("copying_scores", P2, "Diagonal-on-top and eigenvalue copying scores", "app_pages/circuits.py", 2, 4, 10, (
        "`C.argmax(-1)` is each row's largest column; compare it with `torch.arange(V)`.",
        "Centre with `C - C.mean(-1, keepdim=True)`, then `torch.linalg.eigvals` of it in float64; "
        "score `eig.sum().real / eig.abs().sum()`.")),
    Exercise("factored_svals", P2, "A low-rank product's singular values, never formed", "app_pages/circuits.py",
             3, 3, 15, (
        "`torch.linalg.qr(A.double())` returns (Q, R); you need only R. For B, decompose its transpose: "
        "`torch.linalg.qr(B.T.double())[1]`.",
        "`torch.linalg.svdvals(R_A @ R_B.T)`: r x r, largest first.")),
    Exercise("rotary_profile", P2, "A head's positional profile through RoPE", "app_pages/circuits.py", 3, 3, 15, (
        "`cos, sin = rope_cos_sin(n_offsets, d_head, 10000.0)` holds the rotation of every offset t in its row t.",
        "Rotate the query only: `apply_rope(q.expand(n_offsets, d_head), cos, sin) @ k`, then divide by "
        "sqrt(d_head).")),
    Exercise("k_composition", P2, "K-composition of two heads", "app_pages/circuits.py", 2, 3, 10, (
        "`torch.Tensor.norm()` of a matrix is its Frobenius norm.",
        "The keys read the writer: the product is W_OV @ W_QK.T, not W_OV @ W_QK.",
        "The score alone says little: random matrices of the same shapes score about "
        "`core.reading.composition.composition_baseline(d_model, d_head)['K']` (0.09 at d_model 128, d_head 32), "
        "the line the Circuits page sets it against.")),
    Exercise("composition_scores", P2, "Q-, K- and V-composition against a random baseline, batched",
             "app_pages/circuits.py", 3, 4, 20, (
        "`torch.einsum('hdk,hkm->hdm', b.W_V, b.W_O)` stacks every head's W_OV [H, D, D]; "
        "`torch.einsum('hdk,hmk->hdm', b.W_Q, b.W_K)` every W_QK.",
        "Put the writers on axis 0 and the readers on axis 1 (`ov_w[:, None] @ right[None]` is [H, H, D, D]), "
        "then `.norm(dim=(-2, -1))` gives every Frobenius norm at once.",
        "`composition_baseline(model.cfg.d_model, model.cfg.d_head)` is a dict {'Q': ..., 'K': ..., 'V': ...}.")),
    Exercise("composed_ov_circuit", P2, "The effective OV circuit of two heads together", "app_pages/depth.py",
             2, 3, 10, (
        "Follow a token through both heads in the order they act: W_E, the writer's W_V and W_O, the reader's "
        "W_V and W_O, then W_E^T.",)),
    Exercise("full_k_circuit", P2, "The full K-composition circuit W_E W_QK (W_E W_OV)^T", "app_pages/circuits.py",
             3, 4, 15, (
        "The query side is W_E @ W_Q[h]; the key side is what the writer writes for each token, "
        "W_E @ W_V[w] @ W_O[w], read by the reader's W_K[h].",
        "`(model.W_E @ W_Q) @ (keys @ W_K).T` is [V, V]: no rotary and no 1/sqrt(d_head) here.")),
    Exercise("score_parts", P2, "An induction head's attention score, query parts by key parts", "app_pages/depth.py",
             4, 4, 25, (
        "`torch.cat([model.W_E[tokens][None], cache['head_out'][0][0]])` stacks the 1 + H parts [1 + H, T, D]; "
        "`parts @ W_Q[head]` projects them all at once.",
        "`apply_rope` rotates over the last two axes, so it rotates every part's [T, d_head] at once; then "
        "`torch.einsum('pid,sjd->psij', q, k) / math.sqrt(d_head)`.")),
    Exercise("ablation_delta", P2, "Zero and mean ablation: the change in later-copy loss", "app_pages/circuits.py",
             3, 4, 20, (
        "The later-copy targets are the mask of `later_copy_mask` (part 1); the loss is "
        "`F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction='none')[mask].mean()`.",
        "For mean ablation the replacement is `out.mean(0, keepdim=True)`: the batch mean at each position.")),
    Exercise("knockout_rescore", P2, "Knock out the previous-token head, score the induction heads again",
             "app_pages/circuits.py", 2, 4, 15, (
        "An edit on 'blocks.0.attn.hook_z' gets z [B, H, T, d_head]: clone it, set `z[:, head]` to 0 or to "
        "`z[:, head].mean(0, keepdim=True)`, and return it.",
        "Ask the same run to record block 2's pattern: `cache=['blocks.1.attn.hook_pattern']`; then score it as "
        "in induction_score.")),
    Exercise("logit_lens", P3, "The logit lens after each block", "app_pages/causal.py", 2, 4, 10, (
        "Stage s is `cache['resid'][s]`; drop the last position: its prediction has no target.",
        "`probs.gather(-1, tokens[:, 1:, None])[..., 0]` picks the right token's probability at each position.")),
    Exercise("direct_logit_attribution", P3, "Direct logit attribution per head and path", "app_pages/depth.py",
             2, 5, 15, (
        "The parts are [B, T, D] each: `model.W_E[tokens]`, then `cache['head_out'][l][:, h]` for every l and h, "
        "then each `block.b_O.expand(B, T, -1)` when the model has biases.",
        "`(part[:, :-1] * model.W_E[tokens[:, 1:]]).sum(-1)` is one part's term [B, T - 1]: the part at position "
        "t - 1 read by the target's unembedding row.")),
    Exercise("logit_diff_attribution", P3, "Logit-difference attribution", "app_pages/causal.py", 3, 4, 20, (
        "For sequence b the targets are `t = torch.arange(L + 1, 2 * L)`, read at positions t - 1; the wrong "
        "tokens are `corrupted[b, t - L]`.",
        "Each part's term is `(part[b, t - 1] * (W_E[clean[b, t]] - W_E[corrupted[b, t - L]])).sum()`: sum over "
        "every sequence's targets, count them, and divide once at the end.")),
    Exercise("head_patch_effect", P3, "Activation patching of one head", "app_pages/causal.py", 3, 5, 20, (
        "The corrupted run's stream after block `layer` is `kc['resid'][layer + 1]`; swap one head's output in "
        "it by adding (clean output - corrupted output).",
        "`for block in model.blocks[layer + 1:]: h = block(h)`, then `h @ model.W_E.T` gives the logits.")),
    Exercise("path_patch_keys", P3, "Path patching into the keys", "app_pages/causal.py", 4, 4, 30, (
        "Only the receiver's keys change: compute q and v from the clean stream `cc['resid'][rl]`, k from that "
        "stream plus the sender's (corrupted - clean) output.",
        "The receiver's new output replaces its clean one: add (new - cc['head_out'][rl][:, rh]) to "
        "`cc['resid'][rl + 1]`, then run the blocks above.")),
    Exercise("path_patch_inputs", P3, "Path patching into the queries and the values", "app_pages/causal.py",
             4, 4, 20, (
        "Make the three input streams a dict: `x = {p: moved if p == path else h for p in 'qkv'}` with `moved` "
        "the clean stream plus the sender's (corrupted - clean) output.",
        "The rest is path_patch_keys: q, k, v from x['q'], x['k'], x['v'], biases, rotary, the causal softmax, "
        "then swap the receiver's output and run the blocks above.")),
    Exercise("circuit_faithfulness", P3, "A circuit's faithfulness", "app_pages/causal.py", 5, 4, 40, (
        "Write F(kept) once and call it three times: with the circuit, with an empty set, with every element.",
        "Block 2's three input streams start from `cc['resid'][1]`; add `mean1[:, h] - clean1[:, h]` to input p "
        "for each block-1 head h whose ('path', h, p) is missing.",
        "The final stream starts from `cc['resid'][2]`: for each block-2 head add (recomputed output or mean) - "
        "its clean output, and for each missing ('direct', h) add mean1 - clean1 of 1.h.")),
    Exercise("induction_detector", P3, "A detector for the induction archetype", "app_pages/archetypes.py", 2, 3, 10, (
        "`tokens[None, :-1] == tokens[:, None]` is [T, T-1]: entry (i, j-1) says token_{j-1} == token_i; put it "
        "in columns 1..T-1 of the mask.",
        "Divide by the head's whole attention `pattern.sum((-2, -1))`, the statement's sum_ij A[i, j] (every row "
        "of a softmax pattern sums to 1, so for these patterns that is T, the number of rows).")),
    Exercise("attention_detectors", P3, "Previous-token, first-token (sink) and self detectors",
             "app_pages/archetypes.py",
             1, 3, 10, (
        "`i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]` broadcast to [T, T] masks: `j == i - 1`, "
        "`(j == 0) & (i >= 1)`, `j == i`.",
        "Each score is `(pattern * mask).sum((-2, -1)) / pattern.sum((-2, -1))`, [H].")),
    Exercise("train_step", P4, "One training step", "app_pages/train.py", 1, 4, 10, (
        "`F.cross_entropy` wants [N, V] logits and [N] targets: reshape `logits[:, :-1]` and `tokens[:, 1:]`.",
        "The order is zero_grad, backward, step.")),
    Exercise("find_drop", P4, "The loop that finds the drop", "app_pages/train.py", 1, 3, 5, (
        "`math.log` is the natural log: ln 64 / 2 = 2.08 nats.",
        "Walk `zip(steps, losses)` and return at the first loss below the line.")),
    Exercise("bigram_strategy", P5, "The bigram strategy: counting transitions in context", "app_pages/train.py",
             2, 4, 15, (
        "Keep a [B, k, k] table of the transitions seen so far and walk t = 0..T-1: first add the transition "
        "x_{t-1} -> x_t (`counts[torch.arange(B), tokens[:, t - 1], tokens[:, t]] += 1`), then read row x_t.",
        "The row of the current token is `counts[torch.arange(B), tokens[:, t]]` [B, k]; the prediction is "
        "`(row + alpha) / (row.sum(-1, keepdim=True) + k * alpha)`.")),
    Exercise("strategy_kl", P5, "A model's KL to a strategy, position by position", "app_pages/train.py",
             1, 4, 10, (
        "`k = strategy_probs.shape[-1]`; `torch.log_softmax(logits[..., :k], -1)` is log p_model over the states.",
        "`torch.xlogy(p, p)` is p log p with 0 log 0 = 0; subtract `p * log_model`, sum over the states (the last "
        "axis), then `.mean(0)` over the batch.")),
    Exercise("successor_score", P5, "The successor score of a statistical induction head", "app_pages/attention.py",
             2, 5, 15, (
        "`tokens[:, None, :-1] == tokens[:, :, None]` is [B, T, T-1]: entry (i, j-1) says tokens[j-1] == "
        "tokens[i]; put it in columns 1..T-1 of a [B, T, T] mask and keep j <= i (`.tril()`).",
        "`(pattern * mask[:, None]).sum(-1)` is each query's attention on its successor keys [B, H, T]; the "
        "queries that count are `mask.any(-1)` [B, T]: sum over them and divide by how many there are.")),
)
BY_NAME = {ex.name: ex for ex in EXERCISES}


def in_section(section: str) -> list[Exercise]:
    return [ex for ex in EXERCISES if ex.section == section]
