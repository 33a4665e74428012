"""The checks: declared units over typed facts, shared by `check`, `image` and `lint`.

Adding a check: one module in checks/units/ declaring its `Check` (with its `order` in the report)
and its test; the registry finds it, docs/checks.md is generated from it (checks/docs.py), and
`registry.evaluate(subject)` runs it on a host, an image or a config.

The package itself imports nothing: a module that needs one typed facts record (env/target.py before
a launch) does not load the registry and every unit with it. The model is checks/model.py (Check,
Finding, Subject), the registry checks/registry.py (ALL, evaluate).
"""
