"""Collection: the COLLECT policy (``collector``), the AutoHeuristic log it writes (``log_format``,
``whole_lines``), the log's feature columns (``features``) and the wider search space collection times
(``search_space``). Plain data only: nothing here imports Inductor."""
