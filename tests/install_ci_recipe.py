"""docs/ci.md's CI recipes, run (ctest install.ci_recipe, cpu label): a recipe that stops working
fails CI.

    install_ci_recipe.py DOCS_CI_MD PREFIX USER_PLUGIN_DIR WORK_DIR

Reads the YAML block after each marker (<!-- ci-test: github-actions -->, <!-- ci-test: gitlab -->),
and for every matrix entry (GitHub's strategy.matrix, GitLab's parallel) runs the job's shell
steps with bash -e in a fresh workspace holding a copy of USER_PLUGIN_DIR (what actions/checkout
or GitLab's clone would give), against the installed ssmcheck in PREFIX. What the test provides
instead of the job (docs/ci.md lists it): SSMCHECK_PREFIX is PREFIX and the cache is a hit; a step
or script item whose first line is '# ci-test: network ...' is skipped (this machine has the
packages); GATE_CASES is 30 and GATE_FLAGS --no-coverage. After the steps every artifact path
must exist and every JUnit file must say nothing failed. Expressions other than the few it
knows fail the test, naming them. Workspaces are removed.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import yaml

OVERRIDES = {"GATE_CASES": "30", "GATE_FLAGS": "--no-coverage"}
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def block_after(text, marker):
    at = text.find("<!-- ci-test: %s -->" % marker)
    if at < 0:
        raise SystemExit("FAIL docs/ci.md has no '<!-- ci-test: %s -->' marker" % marker)
    m = re.compile(r"```yaml\n(.*?)\n```", re.S).search(text, at)
    if not m:
        raise SystemExit("FAIL no ```yaml block after the %s marker" % marker)
    return yaml.safe_load(m.group(1))


def network_step(script):
    return script.lstrip().startswith("# ci-test: network")


def github_expr(text, ctx):
    """Substitutes ${{ ... }} in text with what ctx knows; an unknown expression fails."""
    def sub(m):
        e = m.group(1).strip()
        if e not in ctx:
            raise ValueError("docs/ci.md uses the expression ${{ %s }}, which the test does not know" % e)
        return str(ctx[e])
    return re.sub(r"\$\{\{(.*?)\}\}", sub, text)


def github_if(cond, ctx):
    cond = cond.strip()
    if cond.startswith("${{") and cond.endswith("}}"):
        cond = cond[3:-2].strip()
    known = {"always()": True, "success()": True, "steps.cache.outputs.cache-hit != 'true'": False,
             "steps.cache.outputs.cache-hit == 'true'": True}
    if cond not in known:
        raise ValueError("docs/ci.md uses the condition 'if: %s', which the test does not know" % cond)
    return known[cond]


def bash(script, cwd, env, what, shown=None):
    print("---- %s\n%s" % (what, (shown or script).rstrip()), flush=True)
    p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True)
    out = (p.stdout + p.stderr).strip()
    if out:
        print("\n".join("  | " + l for l in out.splitlines()[-25:]), flush=True)
    return check(p.returncode == 0, "%s (rc %d)" % (what, p.returncode))


def junit_passed(path):
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    tests = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    return tests > 0 and bad == 0, tests, bad


def fresh_workspace(work, plugin_dir, tag):
    ws = tempfile.mkdtemp(prefix="ws-%s-" % tag, dir=work)
    for name in os.listdir(plugin_dir):
        src = os.path.join(plugin_dir, name)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(ws, name))
    return ws


def base_env(prefix):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSMCHECK") and k != "PYTHONPATH"}
    env["PATH"] = "/usr/bin:/bin"  # no build tree: only what the recipe puts there
    return env


def run_github(job, prefix, plugin_dir, work):
    matrix = job.get("strategy", {}).get("matrix", {})
    check(list(matrix) == ["shard"] and len(matrix["shard"]) > 1, "the GitHub job has a shard matrix: %s" % matrix)
    jobenv = {k: str(v) for k, v in job.get("env", {}).items()}
    check("SSMCHECK_PREFIX" in jobenv, "the GitHub job names SSMCHECK_PREFIX")
    jobenv.update(OVERRIDES, SSMCHECK_PREFIX=prefix)
    for shard in matrix.get("shard", []):
        ws = fresh_workspace(work, plugin_dir, "github-%s" % shard)
        ctx = {"matrix.shard": shard, "steps.cache.outputs.cache-hit": "true"}
        ctx.update({"env." + k: v for k, v in jobenv.items()})
        env = dict(base_env(prefix), **jobenv, GITHUB_WORKSPACE=ws)
        ran_gate = False
        for i, step in enumerate(job["steps"]):
            name = step.get("name") or step.get("uses") or "step %d" % i
            name = github_expr(name, ctx)
            if "if" in step and not github_if(step["if"], ctx):
                print("---- %s: skipped (its if: is false with the cache hit the test provides)" % name, flush=True)
                continue
            if "uses" in step:
                action = step["uses"].split("@")[0]
                if action == "actions/checkout":
                    print("---- %s: the test's workspace is a copy of %s" % (name, plugin_dir), flush=True)
                elif action == "actions/cache":
                    check(github_expr(str(step["with"]["path"]), ctx) == job["env"]["SSMCHECK_PREFIX"],
                          "the cache keeps the install prefix (%s)" % step["with"]["path"])
                elif action == "actions/upload-artifact":
                    for p in github_expr(step["with"]["path"], ctx).split():
                        check(bool(glob.glob(os.path.join(ws, p))), "shard %s: artifact %s exists" % (shard, p))
                else:
                    check(False, "docs/ci.md uses %s, which the test does not provide" % action)
                continue
            script = github_expr(step["run"], ctx)
            if network_step(script):
                print("---- %s: skipped (needs the network; the packages are here)" % name, flush=True)
                continue
            ran_gate |= "gate" in script
            bash(script, ws, env, "GitHub shard %s: %s" % (shard, name))
        check(ran_gate, "GitHub shard %s ran a gate" % shard)
        for x in glob.glob(os.path.join(ws, "*.xml")):
            good, tests, bad = junit_passed(x)
            check(good, "shard %s: %s has %d tests, %d failed" % (shard, os.path.basename(x), tests, bad))
        shutil.rmtree(ws)


def run_gitlab(job, prefix, plugin_dir, work):
    n = int(job.get("parallel", 1))
    check(n > 1, "the GitLab job runs in parallel: %d" % n)
    variables = {k: str(v) for k, v in job.get("variables", {}).items()}
    variables.update(OVERRIDES)
    for index in range(1, n + 1):
        ws = fresh_workspace(work, plugin_dir, "gitlab-%d" % index)
        env = dict(base_env(prefix), CI_PROJECT_DIR=ws, CI_NODE_INDEX=str(index), CI_NODE_TOTAL=str(n))
        # variables as GitLab expands them (in order, $VAR of earlier ones); the prefix: the test's
        exports = "".join('export %s="%s"\n' % (k, v.replace('"', '\\"')) for k, v in variables.items())
        exports += 'export SSMCHECK_PREFIX="%s"\n' % prefix
        items = list(job.get("before_script", [])) + list(job.get("script", []))
        ran_gate = False
        for i, item in enumerate(items):
            if network_step(item):
                print("---- GitLab item %d: skipped (needs the network; the packages are here)" % i, flush=True)
                continue
            ran_gate |= " gate " in item
            bash(exports + item, ws, env, "GitLab node %d/%d, item %d" % (index, n, i), shown=item)
        check(ran_gate, "GitLab node %d ran a gate" % index)
        art = job.get("artifacts", {})
        paths = [re.sub(r"\$CI_NODE_INDEX", str(index), p) for p in art.get("paths", [])]
        for p in paths + list(art.get("reports", {}).get("junit", []) if isinstance(art.get("reports", {}).get("junit"), list)
                              else [art.get("reports", {}).get("junit")] if art.get("reports", {}).get("junit") else []):
            check(bool(glob.glob(os.path.join(ws, p))), "node %d: artifact %s exists" % (index, p))
        for x in glob.glob(os.path.join(ws, "*.xml")):
            good, tests, bad = junit_passed(x)
            check(good, "node %d: %s has %d tests, %d failed" % (index, os.path.basename(x), tests, bad))
        shutil.rmtree(ws)


def main():
    doc, prefix, plugin_dir, work_dir = sys.argv[1:5]
    text = open(doc).read()
    check(os.access(os.path.join(prefix, "bin", "ssmcheck"), os.X_OK), "an installed ssmcheck in %s" % prefix)
    work = tempfile.mkdtemp(prefix="ci-recipe-", dir=work_dir)
    try:
        gh = block_after(text, "github-actions")
        jobs = gh.get("jobs", {})
        check(len(jobs) == 1, "the GitHub workflow has one job: %s" % list(jobs))
        for job in jobs.values():
            run_github(job, prefix, plugin_dir, work)
        gl = block_after(text, "gitlab")
        check(len(gl) == 1, "the GitLab file has one job: %s" % list(gl))
        for job in gl.values():
            run_gitlab(job, prefix, plugin_dir, work)
    except ValueError as e:
        check(False, str(e))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d check(s) failed" % len(failures) if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
