"""Models whose heads are known without the classifier: ground truth for the toolkit.

- :mod:`interp.synthetic.planted`: tiny GPT-2s with hand-set weights, each planted head doing one
  job exactly: where it looks and what it writes (copy, suppress, a successor, nothing);
  :mod:`interp.synthetic.layout` is their wiring, :mod:`interp.synthetic.circuit` a planted
  indirect-object circuit (inhibitor, mover, negative mover) with its task;
- :mod:`interp.synthetic.toy`: a small attention-only model the toolkit trains itself, in which a
  previous-token -> induction circuit emerges (a task on the general trainer);
- :mod:`interp.synthetic.train`: the general trainer of small GPT-2s (optionally attention-only, or
  with heads concatenated and never mixed) on a task of :mod:`interp.synthetic.tasks`.
"""
