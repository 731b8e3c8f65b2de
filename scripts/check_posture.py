"""The security posture of template.yaml: checkov and AWS's CloudFormation Guard rules, on the
template as written and on the template AWS SAM translates it to.

Run by scripts/check-posture (in .venv-posture), which says which tools and rule sets.

    python scripts/check_posture.py [--self-test] TEMPLATE GUARD_RULES_DIR SERVICE...

- Two documents are checked: TEMPLATE itself, and TEMPLATE translated by samtranslator (the
  pinned aws-sam-translator, the library `sam deploy` uses), where the functions, their
  roles and permissions, the API and its stage are plain CloudFormation resources that the
  Lambda, IAM and API Gateway rules can see. Local CodeUri paths become a placeholder
  s3:// location first, as `sam package` would make them.
- checkov (framework cloudformation): every failed check is a finding; a check skipped in a
  resource's `Metadata.checkov.skip` must give its `comment`.
- Guard: every rule file under GUARD_RULES_DIR/<SERVICE>/ is run with cfn-guard-rs. A
  resource suppresses a rule by naming it in `Metadata.guard.SuppressedRules` with its reason
  in `Metadata.guard.Reasons` (rule name: reason). The Control Tower rules do not read
  SuppressedRules themselves, so a finding on a resource that suppresses the rule is counted
  as suppressed here. A suppression without a reason, or naming a rule no file defines, is a
  finding too.
- Resources SAM generates (a function's role, its permissions, its URL) carry no Metadata of
  their own: the SAM resource they come from lists their suppressions in
  `Metadata.generated` (`checkov.skip`, `guard.SuppressedRules` and `guard.Reasons`, as
  above), and they are applied to every resource SAM generated from it (its logical id and a
  suffix).
- Nothing is lost to a long report (cfn-guard-rs 0.3.3 returns only the last 8 KiB of one)
  nor blamed on the wrong resource: a rule file that fails is run again for each resource
  it checks, alone among the resources of the types it checks (but those it refers to),
  with every other resource, and last (see guard_run).

Prints each finding and the counts (before and after suppressions) and exits 1 on any
finding not suppressed. With --self-test, instead plants violations in a copy of TEMPLATE and
exits 1 unless the gate finds every one of them (scripts/check-posture runs both).
"""

import copy
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
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


def load(template):
    with open(template) as f:
        return yaml.load(f, Loader=CfnLoader)


def translate(document):
    """The CloudFormation template SAM makes of `document`, with every generated resource's
    Metadata taken from its SAM resource's `Metadata.generated`."""
    from samtranslator.translator.transform import transform
    from samtranslator.public.exceptions import InvalidDocumentException

    class NoManagedPolicies:
        """The template names managed policies by ARN only: nothing to look up in IAM."""

        def load(self):
            return {}

    # The translator resolves the pseudo parameters' region from the environment.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    document = copy.deepcopy(document)
    for resource in document["Resources"].values():
        if resource.get("Type") == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://sitehost-posture-check/code.zip"
    try:
        translated = transform(document, {}, NoManagedPolicies())
    except InvalidDocumentException as e:
        sys.exit("samtranslator refused the template:\n" + "\n".join(str(c) for c in e.causes))
    sources = sorted(document["Resources"], key=len, reverse=True)
    for name, resource in translated["Resources"].items():
        if name in document["Resources"]:
            continue
        source = next((s for s in sources if name.startswith(s)), None)
        if source is None:
            continue
        generated = (document["Resources"][source].get("Metadata") or {}).get("generated")
        if generated:
            resource["Metadata"] = copy.deepcopy(generated)
    return translated


def checkov(paths):
    """(failed, skipped, problems) of checkov's cloudformation checks of the files `paths`
    (label: path), in one run (two processes at once were slower on two cores beside the
    self-test)."""
    labels = {os.path.abspath(p): label for label, p in paths.items()}
    args = [os.path.join(os.path.dirname(sys.executable), "checkov")]
    for path in paths.values():
        args += ["--file", path]
    out = subprocess.run(
        # No Prisma Cloud: its guideline download needs the network and changes nothing.
        args + ["--framework", "cloudformation", "--skip-download", "--output", "json"],
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

    def label(c):
        path = c.get("file_abs_path") or c.get("file_path") or ""
        return labels.get(os.path.abspath(path), path)

    results = report["results"]
    failed = [
        f"checkov [{label(c)}] {c['check_id']} {c['resource']}: {c['check_name']}"
        for c in results.get("failed_checks", [])
    ]
    skipped, problems = [], []
    for c in results.get("skipped_checks", []):
        comment = (c.get("check_result") or {}).get("suppress_comment") or ""
        line = f"checkov [{label(c)}] {c['check_id']} {c['resource']}: {comment}"
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


def guard_run(document, rules, texts):
    """The resources a rule file finds not compliant (empty: none). `texts`: each
    resource's JSON."""
    types = set(re.findall(r"AWS::\w+::\w+", rules))
    resources = document["Resources"]
    of_type = [n for n, r in resources.items() if r.get("Type") in types]
    if of_type:
        # Only the resources the file checks and those related to them (named by one, or
        # naming one: a bucket's policy): the runs below stay small however large the
        # template.
        def related(n):
            return any(f'"{n}"' in texts[m] for m in of_type) or any(f'"{m}"' in texts[n] for m in of_type)

        resources = {n: r for n, r in resources.items() if n in of_type or related(n)}
        document = dict(document, Resources=resources)
    failed, _, _ = guard_report(document, rules)
    if not failed:
        return []
    if not of_type:
        # A rule about the template as a whole (or types it does not have): the template.
        return ["(template)"]
    # Each resource of the types the file checks alone: with every resource of the other
    # types (a rule may look for the policy or the log configuration that names it), and of
    # its own types only those it refers to (a rule may look a reference up), itself last.
    # A failure is its own when the report names it, or names none of those others. Guard
    # reports a rule's clauses resource by resource in the document's order, and each
    # Control Tower file holds one rule, so a report cut to its last 8 KiB still names the
    # last resource when that one fails.
    found = []
    for name in of_type:
        text = json.dumps(resources[name])
        referenced = {n for n in of_type if n != name and f'"{n}"' in text}
        alone = {n: r for n, r in resources.items() if n != name and (n in referenced or n not in of_type)}
        alone[name] = resources[name]
        failed, _, named = guard_report(dict(document, Resources=alone), rules)
        if failed and (name in named or not (named & referenced)):
            found.append(name)
    return found


def suppressions_of(resources):
    """({resource: rules it suppresses}, problems) from each resource's Metadata.guard."""
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
    return suppressions, problems


def rule_files(rules_dir, services):
    files = []
    for service in services:
        found = sorted(glob.glob(os.path.join(rules_dir, service, "*.guard")))
        if not found:
            sys.exit(f"no Guard rules for {service} under {rules_dir}")
        files += found
    return files


def guard(document, label, files):
    """(before, after, suppressed, problems) of every rule file on one document."""
    suppressions, problems = suppressions_of(document.get("Resources", {}))
    texts = {n: json.dumps(r) for n, r in document.get("Resources", {}).items()}
    before, after, suppressed, defined = [], [], [], set()
    for path in files:
        with open(path) as f:
            text = f.read()
        names = rule_names(text)
        defined |= names
        rule_file = os.path.splitext(os.path.basename(path))[0]
        what = "/".join(sorted(names)) or rule_file
        for resource in guard_run(document, text, texts):
            line = f"guard [{label}] {rule_file} {what} {resource}"
            before.append(line)
            (suppressed if suppressions.get(resource, set()) & names else after).append(line)
    for name, rules in suppressions.items():
        for rule in sorted(rules - defined):
            problems.append(f"guard [{label}] {rule} {name}: suppresses a rule that no rule file defines")
    problems = [p if p.startswith("guard [") else p.replace("guard ", f"guard [{label}] ", 1) for p in problems]
    return before, after, suppressed, problems


def gate(template, rules_dir, services, quiet=False, checkov_translated=True):
    """The findings not suppressed, in both documents (printing each line unless quiet;
    checkov on the source only unless checkov_translated)."""
    files = rule_files(rules_dir, services)
    started = time.monotonic()
    source = load(template)
    translated = translate(source)
    with tempfile.TemporaryDirectory() as tmp:
        translated_path = os.path.join(tmp, "translated.json")
        with open(translated_path, "w") as f:
            json.dump(translated, f)
        paths = {"source": template}
        if checkov_translated:
            paths["translated"] = translated_path
        failed, skipped, checkov_problems = checkov(paths)
    checkov_secs = time.monotonic() - started
    started = time.monotonic()
    before, after, suppressed, guard_problems = [], [], [], []
    for label, document in (("source", source), ("translated", translated)):
        b, a, s, p = guard(document, label, files)
        before, after, suppressed, guard_problems = before + b, after + a, suppressed + s, guard_problems + p
    guard_secs = time.monotonic() - started

    findings = failed + after + checkov_problems + guard_problems
    if not quiet:
        for line in skipped + suppressed:
            print(f"suppressed  {line}")
        for line in findings:
            print(f"FINDING     {line}")
        print(
            f"checkov (source and translated, {len(translated['Resources'])} resources after SAM's "
            f"transform): {len(failed)} failed, {len(skipped)} suppressed ({checkov_secs:.1f} s); "
            f"guard: {len(files)} rule files, {len(before)} findings before suppressions, "
            f"{len(after)} after, {len(suppressed)} suppressed ({guard_secs:.1f} s)"
        )
    return findings


def planted(text):
    """The template with violations planted that the gate must find, and for each what it
    is and the substrings of its expected finding."""
    cases = [
        (
            "a public files bucket (checkov and Guard, source and translated)",
            lambda t: t.replace("        BlockPublicAcls: true\n", "        BlockPublicAcls: false\n", 1),
            ["checkov [source] CKV_AWS_53 ", "guard [translated] ct-s3-pr-1 "],
        ),
        (
            "a function role allowed every action (Guard's IAM rules: the translated template only)",
            lambda t: t.replace(
                "      Policies:\n        - Statement:\n",
                "      Policies:\n        - Statement:\n"
                '            - Effect: Allow\n              Action: "*"\n              Resource: "*"\n',
                1,
            ),
            ["guard [translated] ct-iam-pr-"],
        ),
        (
            "a Guard suppression without its reason",
            lambda t: re.sub(
                r"(\n          s3_bucket_default_encryption_kms_check: )[^\n]*\n", r'\1""\n', t, count=1
            ),
            ["s3_bucket_default_encryption_kms_check", "suppressed without a reason"],
        ),
        (
            "a checkov skip without its comment",
            lambda t: re.sub(r"(\n            comment: )[^\n]*\n", r'\1""\n', t, count=1),
            ["a skip needs its comment"],
        ),
    ]
    planted_cases = []
    for what, plant, expected in cases:
        changed = plant(text)
        if changed == text:
            sys.exit(f"self-test: the template no longer has the place to plant {what}")
        text = changed
        planted_cases.append((what, expected))
    return text, planted_cases


def self_test(template, rules_dir, services):
    with open(template) as f:
        text, cases = planted(f.read())
    # Beside the template, so that its relative paths mean the same.
    directory = os.path.dirname(os.path.abspath(template))
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=directory, delete=False) as f:
        f.write(text)
    try:
        # checkov on the source only: its planted cases show there, and the self-test runs
        # beside the gate on a two-core machine.
        findings = gate(f.name, rules_dir, services, quiet=True, checkov_translated=False)
    finally:
        os.unlink(f.name)
    failures = []
    for what, expected in cases:
        caught = all(any(e in line for line in findings) for e in expected)
        print(f"self-test: {'caught' if caught else 'MISSED'}  {what}")
        if not caught:
            failures.append(f"{what}: expected {expected}")
    if failures:
        print("\n".join(failures + ["findings:"] + findings), file=sys.stderr)
        sys.exit(1)


def main():
    args = sys.argv[1:]
    if args and args[0] == "--self-test":
        template, rules_dir, *services = args[1:]
        self_test(template, rules_dir, services)
        return
    template, rules_dir, *services = args
    findings = gate(template, rules_dir, services)
    if findings:
        print(f"posture: {len(findings)} findings not suppressed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
