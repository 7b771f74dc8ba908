"""``metatune demo``: the whole product on one machine, on embedded defaults and a simulated clock."""

from .runner import Demo, DemoStepFailed
from .scenario import DemoScenario, DemoStudy, scenario
from .stack import demo_data_dir

__all__ = ["Demo", "DemoScenario", "DemoStepFailed", "DemoStudy", "demo_data_dir", "scenario"]
