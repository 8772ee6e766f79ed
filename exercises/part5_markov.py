"""Part 5: Markov chains and statistical induction heads (pages: Train, Attention).

Your file: write each function below, then check it with

    python -m pytest exercises/test_part5_markov.py

from the repository's root folder (ATTENTION_LAB_MODEL=path/to/model.pt checks on your own model).
Hints and solutions: the Exercises page of the app, or exercises/solutions/part5_markov.py.
"""
import torch  # noqa: F401


def bigram_strategy(tokens: torch.Tensor, n_states: int, alpha: float) -> torch.Tensor:
    """The bigram strategy: the Bayes-optimal next-token prediction on a bigram Markov chain.

    tokens [B, T] (long, states 0..n_states-1), each sequence drawn from its own chain whose transition rows
    have a Dirichlet(alpha) prior. Position t predicts token t + 1 from tokens 0..t only: with k = n_states,

        probs[b, t, j] = (N(x_t -> j) + alpha) / (N(x_t ->) + k * alpha)

    where N(x_t -> j) counts the earlier transitions x_i -> x_{i+1} with x_i = x_t, x_{i+1} = j and i + 1 <= t
    (both tokens already seen), and N(x_t ->) = sum_j N(x_t -> j), the transitions out of x_t. Return
    probs [B, T, k] (float64); each row sums to 1.
    """
    raise NotImplementedError("not written yet")


def strategy_kl(logits: torch.Tensor, strategy_probs: torch.Tensor) -> torch.Tensor:
    """How far a model's predictions are from a strategy's: KL(strategy || model) at every position.

    logits [B, T, V]: a model's logits on a batch of Markov sequences, whose states are the first k tokens
    of the vocabulary (V >= k); strategy_probs [B, T, k]: a strategy's prediction at each position (e.g.
    bigram_strategy's). The model's distribution over the states is the softmax of its first k logits
    (renormalised over the states: the other tokens never occur). Return [T] (float64): at each position t,

        sum_j p_s(j) * (log p_s(j) - log p_model(j))

    averaged over the batch (a term with p_s(j) = 0 counts 0).
    """
    raise NotImplementedError("not written yet")


def successor_score(pattern: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The successor (statistical induction) score of every head of one block, on Markov sequences.

    pattern [B, H, T, T] (query i, key j), tokens [B, T]. A key j is a successor of query i when j >= 1,
    j <= i and tokens[j - 1] == tokens[i]: token j followed an earlier occurrence of the current token (the
    key j = i counts when tokens[i - 1] == tokens[i]). These are the transitions the bigram strategy counts.
    For each (sequence, query) pair, sum the attention on its successor keys; average these sums over the
    pairs that have at least one successor key (pooled over the batch). Return [H].
    """
    raise NotImplementedError("not written yet")
