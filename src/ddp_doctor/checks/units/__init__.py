"""The check units, one module per check, each exporting its `Check` declarations at module level (one or more).

Nothing lists them: checks.registry finds every `Check` in every module of this package, and each
unit's `order` places its Result in a report. Units do not import each other (a lint-imports
independence contract); what two of them share lives in the modules below (checks.variables,
checks.install, checks.interfaces, checks.table, checks.facts).
"""
