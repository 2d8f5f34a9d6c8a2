"""The receiver's engine: where the workflow calls are written durably, by group commit, in a
thread (:mod:`.committer`) or in a writer process of its own (:mod:`.writer_process`,
:mod:`.writer_child`); :class:`.runtime.Engine` is what the app starts, closes and writes
through. Nothing here serves HTTP."""
