"""Argo Workflows' `{{...}}` variables a template cannot see: the workflow is refused when it is validated.

Argo validates every template of a Workflow, WorkflowTemplate, ClusterWorkflowTemplate or CronWorkflow before
anything runs (`argo submit`, `argo lint`, and the controller). A leaf template (container, script,
containerSet, resource) is resolved in a scope of its own inputs, pod.name, retries and the workflow's globals;
the `tasks.*` and `steps.*` variables exist only in the DAG or steps template that calls it (its arguments pass
them on as inputs). Any `{{tasks...}}` / `{{steps...}}` tag in a leaf template fails with "failed to resolve
{{...}}" (argoproj/argo-workflows workflow/validate/validate.go, resolveAllVariables and validateLeaf;
https://argo-workflows.readthedocs.io/en/latest/variables/ lists which variables each template type sees).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ddp_doctor.deploy.lint.loader import YList, YMap
from ddp_doctor.deploy.lint.model import Structural

LEAF_TYPES = ("container", "script", "containerSet", "resource")
"""Template types whose body is resolved in the leaf scope (steps and dag templates have tasks / steps)."""
_TAG = re.compile(r"\{\{(.*?)\}\}")
_CALLER_ONLY = ("tasks.", "steps.")
_ALLOWED = ("tasks.name", "steps.name")
"""Recent Argo lets these through unresolved (the name of the calling task or step)."""


def _strings(node: Any, line: int) -> Iterator[tuple[str, int]]:
    if isinstance(node, YMap):
        for key, value in node.items():
            yield from _strings(value, node.value_line(key))
    elif isinstance(node, YList):
        for i, value in enumerate(node):
            yield from _strings(value, node.line_of(i))
    elif isinstance(node, str):
        yield node, line


def out_of_scope(template: YMap) -> list[Structural]:
    """Each `{{tasks...}}` / `{{steps...}}` tag of a leaf template: a variable only its caller has."""
    kind = next((k for k in LEAF_TYPES if isinstance(template.get(k), YMap)), None)
    if kind is None:
        return []
    found: list[Structural] = []
    for text, line in _strings(template, template.line):
        for m in _TAG.finditer(text):
            tag = m.group(1)
            if tag.startswith(_CALLER_ONLY) and not tag.startswith(_ALLOWED):
                ctx = {"tag": m.group(0), "template": str(template.get("name", "?")), "type": kind}
                found.append(Structural("argo_variable_out_of_scope", line, ctx))
    return found
