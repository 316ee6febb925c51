"""The generation engine: Modules, Stages and the Pipeline that run in worker processes."""
