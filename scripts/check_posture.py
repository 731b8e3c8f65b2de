"""The security posture of template.yaml: checkov and AWS's CloudFormation Guard rules.

Run by scripts/check-posture (in .venv-posture), which says which tools and rule sets.

    python scripts/check_posture.py TEMPLATE GUARD_RULES_DIR SERVICE...

- checkov (framework cloudformation, which reads the SAM resources too): every failed check
  is a finding; a check skipped in a resource's `Metadata.checkov.skip` must give its
  `comment`.
- Guard: every rule file under GUARD_RULES_DIR/<SERVICE>/ is run with cfn-guard-rs on the
  template. A resource suppresses a rule by naming it in `Metadata.guard.SuppressedRules`
  with its reason in `Metadata.guard.Reasons` (rule name: reason). The registry's own rules
  read SuppressedRules themselves; the Control Tower rules do not, so a finding on a
  resource that suppresses the rule is counted as suppressed here.
  A suppression without a reason, or naming a rule no file defines, is a finding too.

Prints each finding and the counts (before and after suppressions), and exits 1 on any
finding not suppressed.
"""

import glob
import json
import os
import re
import subprocess
import sys
import time

import yaml
from cfn_guard_rs.cfn_guard_rs import run_checks_rs


class CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags, as the JSON form (`!Ref X` -> {"Ref": "X"})."""


def _tagged(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix in ("Ref", "Condition"):
        return {suffix: value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {"Fn::" + suffix: value}


CfnLoader.add_multi_constructor("!", _tagged)


def checkov(template):
    """(failed, skipped, problems) of checkov's cloudformation checks."""
    out = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "checkov"),
            "--file", template,
            "--framework", "cloudformation",
            # No Prisma Cloud: its guideline download needs the network and changes nothing.
            "--skip-download",
            "--output", "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        report = json.loads(out.stdout)
    except json.JSONDecodeError:
        sys.exit(f"checkov gave no JSON report (exit {out.returncode}):\n{out.stdout}\n{out.stderr}")
    if isinstance(report, list):
        report = next(r for r in report if r.get("check_type") == "cloudformation")
    if not report.get("results"):
        # Nothing failed, passed or was skipped: a summary only.
        return [], [], []
    results = report["results"]
    failed = [
        f"checkov {c['check_id']} {c['resource']}: {c['check_name']}"
        for c in results.get("failed_checks", [])
    ]
    skipped, problems = [], []
    for c in results.get("skipped_checks", []):
        comment = (c.get("check_result") or {}).get("suppress_comment") or ""
        line = f"checkov {c['check_id']} {c['resource']}: {comment}"
        skipped.append(line)
        if not comment.strip() or comment.strip() == "No comment provided":
            problems.append(f"{line}(a skip needs its comment)")
    return failed, skipped, problems


def rule_names(text):
    """The rules a Guard file defines, less parameterised helpers (`rule check(x)`)."""
    found = re.finditer(r"^rule\s+(\w+)\s*(\(?)", text, re.MULTILINE)
    return {m.group(1) for m in found if not m.group(2)}


def guard_report(document, rules):
    """(failed, cut, resources named) of one run of a rule file."""
    raw = run_checks_rs(json.dumps(document), rules, False)
    named = set(re.findall(r'"/Resources/([A-Za-z0-9]+)', raw))
    try:
        return json.loads(raw).get("status") == "FAIL", False, named
    except json.JSONDecodeError:
        # cfn-guard-rs 0.3.3 returns only the last 8 KiB of a long report (one with many
        # failures): still a failure, but it may no longer name every resource.
        return True, True, named


def guard_run(document, rules):
    """The resources a rule file finds not compliant (empty: none)."""
    types = set(re.findall(r"AWS::\w+::\w+", rules))
    resources = document["Resources"]
    of_type = [n for n, r in resources.items() if r.get("Type") in types]
    if of_type:
        # Only the resources the file checks, and those they name: the report stays short
        # (below the 8 KiB that cfn-guard-rs returns whole) however large the template.
        texts = [json.dumps(resources[n]) for n in of_type]
        document = dict(
            document,
            Resources={
                n: r
                for n, r in resources.items()
                if n in of_type or any(f'"{n}"' in t for t in texts)
            },
        )
        resources = document["Resources"]
    failed, cut, named = guard_report(document, rules)
    if not failed:
        return []
    if not cut:
        # The resources of the types the file checks that its paths name (all of them
        # when it names none).
        return [n for n in of_type if n in named] or of_type
    # A cut report: each resource checked again without the others of its type (but with
    # those it refers to), failing when that report names it.
    found = []
    for name in of_type:
        kind = resources[name]["Type"]
        text = json.dumps(resources[name])
        alone = {
            n: r
            for n, r in resources.items()
            if n == name or r.get("Type") != kind or f'"{n}"' in text
        }
        failed, _, named = guard_report(dict(document, Resources=alone), rules)
        if failed and (name in named or not named):
            found.append(name)
    return found


def guard(template, rules_dir, services):
    document = yaml.load(open(template), Loader=CfnLoader)
    resources = document.get("Resources", {})
    suppressions, problems = {}, []
    for name, resource in resources.items():
        meta = (resource.get("Metadata") or {}).get("guard") or {}
        rules = meta.get("SuppressedRules") or []
        reasons = meta.get("Reasons") or {}
        suppressions[name] = set(rules)
        for rule in rules:
            if not str(reasons.get(rule, "")).strip():
                problems.append(f"guard {rule} {name}: suppressed without a reason in Metadata.guard.Reasons")
        for rule in set(reasons) - set(rules):
            problems.append(f"guard {rule} {name}: a reason for a rule it does not suppress")

    files = []
    for service in services:
        found = sorted(glob.glob(os.path.join(rules_dir, service, "*.guard")))
        if not found:
            sys.exit(f"no Guard rules for {service} under {rules_dir}")
        files += found

    before, after, suppressed, defined = [], [], [], set()
    for path in files:
        text = open(path).read()
        names = rule_names(text)
        defined |= names
        label = os.path.splitext(os.path.basename(path))[0]
        what = "/".join(sorted(names)) or label
        for resource in guard_run(document, text):
            line = f"guard {label} {what} {resource}"
            before.append(line)
            (suppressed if suppressions.get(resource, set()) & names else after).append(line)
    for name, rules in suppressions.items():
        for rule in sorted(rules - defined):
            problems.append(f"guard {rule} {name}: suppresses a rule that no rule file defines")
    return len(files), before, after, suppressed, problems


def main():
    template, rules_dir, *services = sys.argv[1:]
    started = time.monotonic()
    failed, skipped, checkov_problems = checkov(template)
    checkov_secs = time.monotonic() - started
    started = time.monotonic()
    files, before, after, suppressed, guard_problems = guard(template, rules_dir, services)
    guard_secs = time.monotonic() - started

    for line in skipped + suppressed:
        print(f"suppressed  {line}")
    findings = failed + after + checkov_problems + guard_problems
    for line in findings:
        print(f"FINDING     {line}")
    print(
        f"checkov: {len(failed)} failed, {len(skipped)} suppressed ({checkov_secs:.1f} s); "
        f"guard: {files} rule files, {len(before)} findings before suppressions, "
        f"{len(after)} after, {len(suppressed)} suppressed ({guard_secs:.1f} s)"
    )
    if findings:
        print(f"posture: {len(findings)} findings not suppressed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
