"""Part 5: Markov chains and statistical induction heads (pages: Train, Attention). Solutions.

The Markov-chain task of Edelman et al. (2024), "The evolution of statistical induction heads": every
sequence follows its own bigram chain, drawn afresh, so a model can only predict well by counting the
transitions in its context.
"""
import torch


def bigram_strategy(tokens: torch.Tensor, n_states: int, alpha: float) -> torch.Tensor:
    """The bigram strategy: the Bayes-optimal next-token prediction on a bigram Markov chain.

    tokens [B, T] (long, states 0..n_states-1), each sequence drawn from its own chain whose transition rows
    have a Dirichlet(alpha) prior. Position t predicts token t + 1 from tokens 0..t only: with k = n_states,

        probs[b, t, j] = (N(x_t -> j) + alpha) / (N(x_t ->) + k * alpha)

    where N(x_t -> j) counts the earlier transitions x_i -> x_{i+1} with x_i = x_t, x_{i+1} = j and i + 1 <= t
    (both tokens already seen), and N(x_t ->) = sum_j N(x_t -> j), the transitions out of x_t. Return
    probs [B, T, k] (float64); each row sums to 1.
    """
    B, T = tokens.shape
    k = n_states
    counts = torch.zeros(B, k, k, dtype=torch.float64)  # counts[b, a, j]: transitions a -> j seen so far
    probs = torch.zeros(B, T, k, dtype=torch.float64)
    rows = torch.arange(B)
    for t in range(T):
        if t >= 1:  # the transition x_{t-1} -> x_t is seen once token t is
            counts[rows, tokens[:, t - 1], tokens[:, t]] += 1.0
        row = counts[rows, tokens[:, t]]  # [B, k]: the transitions out of the current token
        probs[:, t] = (row + alpha) / (row.sum(-1, keepdim=True) + k * alpha)
    return probs


def strategy_kl(logits: torch.Tensor, strategy_probs: torch.Tensor) -> torch.Tensor:
    """How far a model's predictions are from a strategy's: KL(strategy || model) at every position.

    logits [B, T, V]: a model's logits on a batch of Markov sequences, whose states are the first k tokens
    of the vocabulary (V >= k); strategy_probs [B, T, k]: a strategy's prediction at each position (e.g.
    bigram_strategy's). The model's distribution over the states is the softmax of its first k logits
    (renormalised over the states: the other tokens never occur). Return [T] (float64): at each position t,

        sum_j p_s(j) * (log p_s(j) - log p_model(j))

    averaged over the batch (a term with p_s(j) = 0 counts 0).
    """
    k = strategy_probs.shape[-1]
    log_model = torch.log_softmax(logits[..., :k].to(torch.float64), dim=-1)
    p = strategy_probs.to(torch.float64)
    log_p = torch.where(p > 0, p, torch.ones_like(p)).log()
    return (p * (log_p - log_model)).sum(-1).mean(0)


def successor_score(pattern: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The successor (statistical induction) score of every head of one block, on Markov sequences.

    pattern [B, H, T, T] (query i, key j), tokens [B, T]. A key j is a successor of query i when j >= 1,
    j <= i and tokens[j - 1] == tokens[i]: token j followed an earlier occurrence of the current token (the
    key j = i counts when tokens[i - 1] == tokens[i]). These are the transitions the bigram strategy counts.
    For each (sequence, query) pair, sum the attention on its successor keys; average these sums over the
    pairs that have at least one successor key (pooled over the batch). Return [H].
    """
    B, H, T, _ = pattern.shape
    total, count = torch.zeros(H, dtype=pattern.dtype), 0
    for b in range(B):
        seq = tokens[b].tolist()
        for i in range(T):
            keys = [j for j in range(1, i + 1) if seq[j - 1] == seq[i]]
            if keys:
                total += pattern[b, :, i, keys].sum(-1)
                count += 1
    return total / count
