"""Use: the USE policy (``ranking``) and what it rests on: finding, trusting, trying and guarding artifacts
(``artifact_loader``, ``artifact_trust``, ``artifact_trial``, ``artifact_guard``), choice ids
(``choice_ids``), the aten margin (``aten_margin``) and the L2 rule (``l2_residency``). Plain data only."""
