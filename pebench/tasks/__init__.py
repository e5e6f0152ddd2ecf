"""Task families: the contract (:mod:`.base`) and the built-in families, registered through
the ``pebench.tasks`` entry-point group."""

from pebench.tasks.base import Example, LengthBucket, Task

__all__ = ["Example", "LengthBucket", "Task"]
