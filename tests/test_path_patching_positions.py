"""Path patching per position and with a mean reference (core.causal.path_patching.path_patch_positions):
against a naive float64 loop written here from the definitions (nothing from core/ but the
weights), the sums over positions that must add up, the planted induction circuit whose answers are known
by construction, and the arguments it refuses."""
from __future__ import annotations

import math

import pytest
import torch

from core.causal import patching as P
from core.causal import path_patching as PP
from core.causal.corruptions import corrupt
from core.model.task import TaskConfig, sample_batch
from exercises.planted import INDUCTION, PREV, planted_induction_model

from helpers import tiny_model
from naive import naive_rope


def naive_heads(model, x, layer_inputs=None):
    """One sequence x [T] in float64 with explicit loops: (logits [T, V], the stream entering each block and
    the last one, {(layer, head): output [T, D]})."""
    return run_from(model, x, 0, None, layer_inputs or {}, {})


def run_from(model, x, start, h, layer_inputs, outputs):
    """Blocks start.. on stream h [T, D] (the embedding of x when h is None). layer_inputs: {(layer, head):
    {"q"|"k"|"v": stream [T, D]}} is what that head reads for that input; outputs: {(layer, head): [T, D]}
    replaces that head's output."""
    cfg = model.cfg
    W = {k: v.detach().double() for k, v in model.state_dict().items()}
    T, dh = len(x), cfg.d_head
    h = W["W_E"][x] if h is None else h
    streams, outs = [], {}
    for l in range(start, cfg.n_layers):
        streams.append(h)
        update = torch.zeros_like(h)
        for hd in range(cfg.n_heads):
            reads = {n: layer_inputs.get((l, hd), {}).get(n, h) for n in "qkv"}
            qkv = {}
            for n in "qkv":
                y = reads[n] @ W[f"blocks.{l}.W_{n.upper()}"][hd]
                if cfg.bias:
                    y = y + W[f"blocks.{l}.b_{n.upper()}"][hd]
                qkv[n] = naive_rope(y, cfg.rope_base) if n != "v" else y
            out = torch.zeros_like(h)
            for i in range(T):
                s = torch.stack([qkv["q"][i] @ qkv["k"][j] for j in range(i + 1)]) / math.sqrt(dh)
                out[i] = (torch.softmax(s, 0) @ qkv["v"][: i + 1]) @ W[f"blocks.{l}.W_O"][hd]
            out = outputs.get((l, hd), out)
            outs[(l, hd)] = out
            update = update + out
        h = h + update + (W[f"blocks.{l}.b_O"] if cfg.bias else 0.0)
    streams.append(h)
    return h @ W["W_E"].T, streams, outs


def naive_M(logits, tokens, periods):
    vals = [torch.log_softmax(logits[b][t - 1], 0)[tokens[b, t]].item()
            for b in range(len(logits)) for t in range(int(periods[b]) + 1, 2 * int(periods[b]))]
    return sum(vals) / len(vals)


def naive_cell(model, clean, periods, c, k, sender, receiver, path, p, by, reference):
    """M of one noising path patch, from the definitions: each clean sequence's receivers read the clean stream
    plus (reference output - clean output of the sender), at position p only (by="sender") or everywhere with
    only the receivers' output at p changed (by="receiver"); the blocks above the receiver rerun. c, k: the
    naive clean and corrupted runs."""
    mean = torch.stack([r[2][sender] for r in k]).mean(0)
    rl, rh = receiver
    heads = range(model.cfg.n_heads) if rh is None else [rh]
    logits = []
    for b, x in enumerate(clean):
        donor = mean if reference == "mean" else k[b][2][sender]
        delta = donor - c[b][2][sender]
        if by == "sender":
            keep = torch.zeros(len(x), 1, dtype=torch.float64)
            keep[p] = 1
            delta = delta * keep
        h = c[b][1][rl]
        patched = run_from(model, x, rl, h, {(rl, hd): {path: h + delta} for hd in heads}, {})[2]
        outs = {}
        for hd in heads:
            new = patched[(rl, hd)]
            if by == "receiver":
                new = c[b][2][(rl, hd)].clone()
                new[p] = patched[(rl, hd)][p]
            outs[(rl, hd)] = new
        logits.append(run_from(model, x, rl, h, {}, outs)[0])
    return naive_M(logits, clean, periods)


@pytest.fixture(scope="module", params=[False, True], ids=["no-bias", "bias"])
def small(request):
    """A random 3-block model (float64; a receiver in block 2 has a block above it), two sequences. Embedding and
    outputs scaled down so that no pattern saturates: a one-hot pattern would make every sum below add up."""
    model = tiny_model(3, bias=request.param, seed=7, dtype=torch.float64)
    with torch.no_grad():
        model.W_E.mul_(0.5)
        for block in model.blocks:
            block.W_O.mul_(0.4)
    task = TaskConfig(period_min=4, period_max=5, seq_len=10)
    g = torch.Generator().manual_seed(1)
    clean, periods = sample_batch(task, 2, model.cfg.vocab_size, generator=g)
    corrupted = corrupt(clean, periods, model.cfg.vocab_size, g)
    T = 2 * int(periods.max())
    naive = [naive_heads(model, x) for x in clean[:, :T]], [naive_heads(model, x) for x in corrupted[:, :T]]
    return model, clean, corrupted, periods, P.prepare(model, clean, corrupted, periods), naive


@pytest.mark.parametrize("by,reference,path,receiver,sender", [
    ("sender", "corrupted", "k", (1, 2), (0, 1)),
    ("sender", "mean", "q", (1, None), (0, 3)),
    ("receiver", "corrupted", "v", (1, 0), (0, 2)),
    ("receiver", "mean", "k", (2, None), (1, 1)),
])
def test_cells_match_the_naive_loop(small, by, reference, path, receiver, sender):
    model, clean, corrupted, periods, runs, (c, k) = small
    got = PP.path_patch_positions(model, runs, [sender], receiver, path, "noising", reference, by)[0]
    T = runs.clean.shape[1]
    for p in (1, T - 3):
        want = naive_cell(model, clean[:, :T], periods, c, k, sender, receiver, path, p, by, reference)
        assert float(got[p]) == pytest.approx(want, abs=1e-9), p


@pytest.mark.parametrize("path", ["q", "k", "v"])
@pytest.mark.parametrize("direction", ["noising", "denoising"])
def test_a_last_block_receivers_positions_add_up_to_the_whole_path(small, path, direction):
    """Into the last block, by receiver position: each position's change reaches only its own logits, so the
    changes add up to the whole path's (path_patch) exactly. By sender position the query path adds up too (a
    query at p changes only row p); a key or value at p is read by every later query, and M is not linear in
    what a row mixes, so those do not add up, which shows that the check can fail."""
    model, *_, runs, _ = small
    senders = [(0, h) for h in range(4)] + [(1, 2)]
    base = runs.m_clean if direction == "noising" else runs.m_corrupted
    for receiver in ((2, None), (2, 1)):
        whole = PP.path_patch(model, runs, senders, receiver, path, direction) - base
        cells = PP.path_patch_positions(model, runs, senders, receiver, path, direction, by="receiver") - base
        assert torch.allclose(cells.sum(1), whole, atol=1e-10)
        assert whole.abs().max() > 1e-3
        by_sender = PP.path_patch_positions(model, runs, senders, receiver, path, direction, by="sender") - base
        off = (by_sender.sum(1) - whole).abs().max()
        assert off < 1e-10 if path == "q" else off > 1e-4


def test_with_one_reference_run_the_mean_is_that_run(small):
    model, clean, corrupted, periods, *_ = small
    one = P.prepare(model, clean[:1], corrupted[:1], periods[:1])
    for by in PP.RESOLUTIONS:
        a = PP.path_patch_positions(model, one, [(0, 1), (1, 3)], (2, None), "k", reference="mean", by=by)
        b = PP.path_patch_positions(model, one, [(0, 1), (1, 3)], (2, None), "k", reference="corrupted", by=by)
        assert torch.equal(a, b)


def test_planted_circuit_needs_its_key_path_only_where_the_first_copy_is_read():
    """Planted: head 1.1 writes the previous token into a slot only head 2.2's keys read; 2.2's query and values
    read the token itself. With distinct tokens, the query at second-copy position i finds its key at
    i - L + 1 (1 .. L-1). So noising 1.1 -> 2.2's key path costs M only at sender positions 0 .. L (where the
    first-copy corruption changes what 1.1 writes) and costs some at each of 2 .. L-1; past L the sender's
    output is the same in both runs and nothing is lost; its query and value paths cost nothing anywhere."""
    model = planted_induction_model()
    g = torch.Generator().manual_seed(0)
    L, B = 8, 16
    clean = torch.stack([torch.randperm(16, generator=g)[:L] for _ in range(B)]).repeat(1, 2)
    periods = torch.full((B,), L)
    runs = P.prepare(model, clean, corrupt(clean, periods, 16, g), periods)
    gap = runs.m_clean - runs.m_corrupted
    for reference in PP.REFERENCES:
        lost = {path: (runs.m_clean - PP.path_patch_positions(model, runs, [PREV], INDUCTION, path, "noising",
                                                               reference)[0]) / gap for path in "qkv"}
        assert lost["q"].abs().max() < 1e-5 and lost["v"].abs().max() < 1e-5
        assert lost["k"][L + 1:].abs().max() < 1e-5
        assert lost["k"][2:L].min() > 0.03, reference
        assert lost["k"].sum() > 0.5


def test_bad_arguments_are_refused_with_a_sentence(small):
    model, *_, runs, _ = small
    cases = [
        (dict(receiver=(0, 1)), "block 2 or above"),
        (dict(receiver=(3, 1)), "block 2 or above"),
        (dict(receiver=(1, 9)), "Receiver head 9"),
        (dict(senders=[(1, 0)]), "earlier block"),
        (dict(senders=[(0, 7)]), "sender head does not exist"),
        (dict(path="x"), "path must be"),
        (dict(direction="sideways"), "direction must be"),
        (dict(reference="median"), "reference must be"),
        (dict(reference="mean", direction="denoising"), "has no reference to average"),
        (dict(by="both"), "by must be"),
    ]
    for change, phrase in cases:
        args = dict(senders=[(0, 0)], receiver=(1, 2), path="k", direction="noising", reference="corrupted",
                    by="sender") | change
        with pytest.raises(ValueError, match=phrase):
            PP.path_patch_positions(model, runs, **args)


@pytest.mark.slow
def test_the_pages_sentence_on_the_shipped_file_states_its_numbers():
    """The shipped 2-block file, the page's defaults (period 24, 32 sequences, seed 0, first copy): each number of
    the sentence recomputed, the whole path's loss by path_patch (not from the cells it is said to equal)."""
    from core.causal import check_readings, checks
    from core.model.checkpoints import read_checkpoint

    from helpers import ROOT

    model, info = read_checkpoint(ROOT / "checkpoints" / "variable-period-2block.pt")
    runs = P.task_runs(model, info["task"], 32, 0, 24)
    gap = runs.m_clean - runs.m_corrupted
    pos = checks.path_positions(model, runs)
    whole = checks.whole_paths(pos)
    said = check_readings.positions_sentence(pos, whole, 24, gap, "first-copy")
    senders = [(0, h) for h in range(4)]
    full = (runs.m_clean - PP.path_patch(model, runs, senders, (1, None), "k", "noising")) / gap
    top = int(full.argmax())
    assert top == 3 and f"Noising 1.4's key path into all of block 2 loses {float(full[top]):.3f}" in said
    k = pos[(pos["reference"] == "corrupted") & (pos["by"] == "sender") & (pos["sender"] == "1.4")]
    cells = -k["change"].to_numpy()
    assert f"they sum to {cells.sum():.3f} instead" in said and abs(cells.sum() - float(full[top])) > 0.005
    assert f"{cells[:24].sum() / cells.sum():.0%} of those cells' loss sits at the first copy" in said
    mean = whole.set_index(["reference", "path", "sender"])
    assert f"the same path loses {mean.loc[('mean', 'k', '1.4'), 'lost']:.3f}" in said
    q = whole[(whole["reference"] == "mean") & (whole["path"] == "q")].set_index("sender")["lost"]
    assert f"the most needed query path is {q.idxmax()}'s ({q.max():.3f} lost" in said
