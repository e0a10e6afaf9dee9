"""The ranking trainer as an estimator, in the manner of scikit-learn: parameters in ``__init__``, ``fit``
returns the estimator, what fitting learned ends in ``_``, and ``rank`` answers for one input given as a
plain dict of the log's feature columns (what the generated artifact answers).

    trainer = RankingTrainer(k=10, default="extern_mm").fit(main, extras, spec)
    trainer.rank({"m": 1024, "k": 4096, "n": 4096, ...})   # [(choice id, score), ...], best first
    source = trainer.to_artifact("MMRankingH200", metadata)  # the artifact's Python source

The command lines (``torchgen_ah.mm.train_decision_mm``, ``torchgen_ah.train_generic``) are thin layers
over this class; the fitting itself is ``train_decision.train`` (split by input, grid search on the
validation folds, refit) or, for a handful of inputs, one fit on all of them.
"""

from __future__ import annotations

from torchgen_ah.training import codegen
from torchgen_ah.training.train_decision import (
    FeatureSpec,
    MedianTimeMatrix,
    RankingTree,
    TrainResult,
    fit_ranking_tree,
    grid_points,
    stack,
    train,
)


class NotFittedError(RuntimeError):
    """``rank`` or ``to_artifact`` before ``fit``."""


class RankingTrainer:
    """Fits the ranking decision tree on median-time tables (one main dataset, optional extra ones).

    k: the top-k the grid search scores; default: the choice every ranking falls back to (the aten one);
    holdout: "none" (train on every input), "sha1mod5" or "sha1mod5:B" (hold a fifth of the inputs out and
    report on them); grid: the hyperparameter grid (None: the trainer's default); cross_validate: False fits
    once on every input with the grid's first point (for a handful of inputs, too few to hold any out);
    log: where progress lines go.
    """

    _PARAMS = ("k", "default", "holdout", "grid", "cross_validate", "log")

    def __init__(self, *, k: int = 10, default: str | None = None, holdout: str = "none",
                 grid: dict | None = None, cross_validate: bool = True, log=print):
        self.set_params(k=k, default=default, holdout=holdout, grid=grid, cross_validate=cross_validate, log=log)

    def get_params(self) -> dict:
        return {name: getattr(self, name) for name in self._PARAMS}

    def set_params(self, **params) -> "RankingTrainer":
        unknown = set(params) - set(self._PARAMS)
        if unknown:
            raise ValueError(f"unknown parameter(s) {sorted(unknown)}; known: {sorted(self._PARAMS)}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def fit(self, main: MedianTimeMatrix, extras=(), spec: FeatureSpec | None = None) -> "RankingTrainer":
        """Learn the tree from ``main`` and ``extras``; ``spec`` names the features (None: the main table's)."""
        extras = list(extras)
        if spec is None:
            spec = FeatureSpec(list(main.features.columns), [])
        if self.cross_validate:
            result = train(main, extras, spec, k=self.k, default=self.default, holdout=self.holdout,
                           grid=self.grid, log=self.log)
        else:
            tables = [main] + extras
            spec = spec.fit([t.features for t in tables])
            choices = sorted(set(main.choices).union(*[t.choices for t in extras]))
            params = grid_points(self.grid)[0] if self.grid else {}
            self.log(f"  {sum(len(t.keys) for t in tables)} inputs: no validation split; fitting {params} on all of them")
            model = fit_ranking_tree(stack(tables, spec, choices), spec, choices, default=self.default, k=self.k,
                                     **params)
            result = TrainResult(model, [], [(params, float("nan"))], params)
        self.model_: RankingTree = result.model
        self.choices_: list[str] = list(result.model.choices)
        self.metrics_ = result.metrics
        self.grid_scores_ = result.grid
        self.best_params_ = result.best_params
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise NotFittedError("this RankingTrainer is not fitted yet: call fit(main, extras, spec) first")

    @property
    def result_(self) -> TrainResult:
        """What fitting found, as one record (for reports)."""
        self._check_fitted()
        return TrainResult(self.model_, self.metrics_, self.grid_scores_, self.best_params_)

    def rank(self, features: dict) -> list[tuple[str, float]]:
        """Every known choice for one input, best first, with its score (the artifact's answer)."""
        self._check_fitted()
        return self.model_.rank(features)

    def to_artifact(self, heuristic_name: str, metadata: dict, *, device_names=(), command: str = "",
                    sources: list[str] | None = None) -> str:
        """The Python source of the artifact class ``heuristic_name`` (byte-identical for the same fit)."""
        self._check_fitted()
        return codegen.generate_artifact(self.model_, heuristic_name, metadata, device_names=tuple(device_names),
                                         command=command, sources=sources)
