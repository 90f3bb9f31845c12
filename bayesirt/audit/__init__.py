"""The family-DIF near-tie audit of the NT paper (primary analysis)."""

from bayesirt.audit.job import run_audit_job
from bayesirt.audit.output import audit_summary, audit_tree, write_audit
from bayesirt.audit.primary import AuditConfig, AuditResult, FoldResult, run_audit
from bayesirt.audit.robustness import add_diagnostics

__all__ = ["AuditConfig", "AuditResult", "FoldResult", "run_audit", "audit_summary", "audit_tree", "write_audit",
           "run_audit_job", "add_diagnostics"]
