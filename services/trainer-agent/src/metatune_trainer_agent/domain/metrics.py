"""Task metrics on the held-out split."""

from __future__ import annotations


def classification_metrics(
    predictions: list[int], targets: list[int], num_labels: int
) -> tuple[float, float]:
    """Accuracy and macro-F1 (mean F1 over the classes present in targets or predictions)."""
    if not targets:
        return 0.0, 0.0
    accuracy = sum(p == t for p, t in zip(predictions, targets, strict=True)) / len(targets)
    f1s = []
    for label in range(num_labels):
        tp = sum(p == label and t == label for p, t in zip(predictions, targets, strict=True))
        fp = sum(p == label and t != label for p, t in zip(predictions, targets, strict=True))
        fn = sum(p != label and t == label for p, t in zip(predictions, targets, strict=True))
        if tp + fp + fn == 0:
            continue  # class absent from both: it does not count
        f1s.append(2 * tp / (2 * tp + fp + fn))
    return accuracy, sum(f1s) / len(f1s) if f1s else 0.0
