"""How the Laws page reads its tables (checkpoints/laws/): one module per table, on shared statistics.

- stats: a point's runs, the log-log fit of the medians and its paired bootstrap, the number formatting.
- drop: the laws of the drop (context, seqlen, batch, vocab): the slope against each published prediction.
- clamps: the clamps table, each clamped arm against the unclamped one.
- readings: the Causal page's readings over training seeds.
- stages: the constant-rate table's onset, drop and completion, and the seeds a slope needs.
- markov: the Markov-chain table's unigram and bigram onsets against the number of states.
"""
