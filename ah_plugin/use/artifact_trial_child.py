"""The child's side of an artifact's trial (``artifact_trial``): executes the file and calls each artifact once
on made-up inputs, saying each step on a descriptor the parent reads, so that the parent can name the step
where the child hung, crashed or exited. Runs only in the trial's process."""

from __future__ import annotations

import os
import sys

from . import artifact_guard, artifact_loader


def _made_up_inputs(attributes: dict, instance) -> tuple[dict, dict]:
    """Metadata and features of the kind the plugin passes, for the artifact's own op and device."""
    metadata = {"name": attributes["op_name"], "device_capa": tuple(getattr(instance, "device_capa", (0, 0))),
                "shared_memory": getattr(instance, "shared_memory", 0),
                "device_name": (attributes["device_names"] or ("cpu",))[0]}
    features = {name: 64 for name in getattr(instance, "numerical_features", ()) or ()}
    features.update({name: "torch.float16" for name in getattr(instance, "categorical_features", ()) or ()})
    return metadata, features


def child(path: str, out: int) -> None:
    """The trial (in the child process): execute the file, then call each artifact once; progress lines
    on descriptor ``out``, which the parent reads. An exception a call raises on made-up inputs is no
    verdict (the guard contains exceptions); an exception while executing the file is."""
    def say(*words: str) -> None:
        os.write(out, (" ".join(words).replace("\n", " ") + "\n").encode("utf-8", "replace"))

    sys.argv = [path]
    say("step", "executing it")
    try:
        found = artifact_loader._execute(path, "ah_plugin._artifact_on_trial")
    except BaseException as error:  # noqa: B036 - a trial reports everything
        say("problem", "executing it", artifact_guard.describe(error, path))
        return
    for instance, attributes in found:
        if not isinstance(attributes, dict):
            continue
        try:
            metadata, features = _made_up_inputs(attributes, instance)
        except BaseException:  # noqa: B036 - odd attributes: the calls get empty inputs
            metadata, features = {"name": attributes["op_name"]}, {}
        for method, argument in (("check_precondition", metadata), ("rank", features)):
            say("step", f"class {type(instance).__name__}: {method}()")
            try:
                getattr(instance, method)(dict(argument))
            except BaseException:  # noqa: B036 - made-up inputs may well be refused
                pass
    say("done")
