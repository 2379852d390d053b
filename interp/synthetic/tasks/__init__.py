"""Training tasks for :func:`interp.synthetic.train.train`: seeded data generators over a word-level
vocabulary, one module per task. Each task has ``name``, ``words``, ``seq_len``, ``params()`` and
``batch(n, gen, tok) -> TrainingBatch`` (see :class:`interp.synthetic.train.TrainingTask`).

- :mod:`~interp.synthetic.tasks.grammar`: the grammar language of :mod:`interp.probes.grammar`
  (long-range subject-verb agreement, relative clauses, punctuation) with repeated sentences;
- :mod:`~interp.synthetic.tasks.relations`: a verb whose lemma is cued by the previous token and
  whose number agrees with a distant subject, so one position needs two relationships at once.
"""
