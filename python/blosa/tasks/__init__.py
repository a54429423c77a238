"""Task families: per family the batch layout, the model head around a blosa.nn encoder, the loss,
the predictions and the metrics. build_task(spec) gives the Task of a blosa.data DatasetSpec.
"""
from __future__ import annotations

from blosa.tasks.base import ClassIdTask, PairModel, Task, embed_and_encode, encode_pair
from blosa.tasks.classification import ClassificationTask, ClassifierHead, SentenceClassifier
from blosa.tasks.metrics import accuracy, mse, pearson, spearman
from blosa.tasks.nli import NLIModel, NLITask, nli_features
from blosa.tasks.relatedness import (RelatednessModel, RelatednessTask, relatedness_features,
                                     target_distribution)
from blosa.tasks.selection import SelectionTask, SentenceSelector, selection_features

TASK_FAMILIES: dict[str, type[Task]] = {
    "classification": ClassificationTask,
    "nli": NLITask,
    "relatedness": RelatednessTask,
    "selection": SelectionTask,
}


def build_task(spec) -> Task:
    """The Task of a dataset: TASK_FAMILIES[spec.family](num_classes=spec.num_classes).
    spec: a blosa.data DatasetSpec (or anything with name, family and num_classes)."""
    family = getattr(spec, "family", None)
    try:
        cls = TASK_FAMILIES[family]
    except (KeyError, TypeError):
        name = getattr(spec, "name", spec)
        raise ValueError(f"dataset {name!r} has family {family!r}; "
                         f"known families: {sorted(TASK_FAMILIES)}") from None
    try:
        return cls(num_classes=spec.num_classes)
    except ValueError as err:  # generic's registry entry, say: its classes come with its files
        raise ValueError(f"dataset {getattr(spec, 'name', spec)!r}: {err} (for a dataset whose "
                         f"classes come from its files, use load_dataset(...).spec)") from None


__all__ = [
    "TASK_FAMILIES", "ClassIdTask", "ClassificationTask", "ClassifierHead", "NLIModel", "NLITask",
    "PairModel",
    "RelatednessModel", "RelatednessTask", "SelectionTask", "SentenceClassifier",
    "SentenceSelector", "Task", "accuracy", "build_task", "embed_and_encode", "encode_pair", "mse",
    "nli_features", "pearson", "relatedness_features", "selection_features", "spearman",
    "target_distribution",
]
