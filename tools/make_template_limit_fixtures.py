#!/usr/bin/python3
"""Writes tests/fixtures/template_limits.json: templates nested near the
depths Jinja2 itself can render, and a million-iteration loop, each with the
text Python's Jinja2 renders (tests/test_template_limits.c compares octet's
rendering of each).

Usage (Debian's /usr/bin/python3 with python3-jinja2):

    /usr/bin/python3 tools/make_template_limit_fixtures.py [OUT_JSON]

The environment is transformers' (ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and loopcontrols), with Python's recursion limit
raised so that deep expressions render instead of raising RecursionError.
Cases marked "env": "plain" use jinja2.Environment with the same options:
the sandbox refuses range() longer than 100000, which octet allows (up to
10^6).  Jinja2 compiles a template to Python, so nested blocks stop below
Python's 100 indentation levels (ifs) and 20 nested loops (fors).
"""
import json
import sys

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.exit("make_template_limit_fixtures.py: jinja2 is missing: apt-get install python3-jinja2")

OPTS = dict(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])


def nested(open_, mid, close, n):
    return open_ * n + mid + close * n


def cases():
    yield "if_nested_90", nested("{% if true %}a", "x", "{% endif %}", 90), None
    yield "if_else_nested_90", nested("{% if false %}{% else %}b", "y", "{% endif %}", 90), None
    yield "for_nested_18", nested("{% for i in [1, 2] %}{{ loop.index }}", "-", "{% endfor %}",
                                  18 - 8) + nested("{% for j in [7] %}", "z", "{% endfor %}", 8), None
    yield "paren_200", "{{ " + nested("(", "1 + 2", ") - 2", 200) + " }}", None
    yield "list_200", "{{ " + nested("[", "'s'", "]", 200) + " }}", None
    yield "dict_200", "{{ " + nested("{'k': ", "1", "}", 200) + " }}", None
    yield "unary_200", "{{ " + "-" * 200 + "7 }}", None
    yield "not_200", "{{ " + "not " * 200 + "true }}", None
    yield "filter_args_200", "{{ " + nested("none | default(", "'d'", ")", 200) + " }}", None
    yield "mixed_200", "{{ " + nested("[(", nested("-(", "3", ")", 50), ")]", 50) + " }}", None
    yield ("loop_1e6_nested", "{% for i in range(1000) %}{% for j in range(1000) %}"
           "{% endfor %}{% endfor %}", None)
    yield "loop_1e6", "{% for i in range(1000000) %}{% endfor %}", "plain"
    yield ("loop_1e6_alloc", "{% for i in range(1000) %}{% for j in range(1000) %}"
           "{{ '' if (j ~ 'abcdefgh') == 'x' }}{% endfor %}{% endfor %}", None)
    yield ("loop_1e6_ns", "{% set ns = namespace(n=0) %}{% for i in range(1000) %}"
           "{% for j in range(1000) %}{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}"
           "{{ ns.n }}", None)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/template_limits.json"
    sys.setrecursionlimit(100000)
    envs = {None: ImmutableSandboxedEnvironment(**OPTS), "plain": jinja2.Environment(**OPTS)}
    out = []
    for name, src, env in cases():
        text = envs[env].from_string(src).render(messages=[])
        case = {"name": name, "template": src, "text": text}
        if env:
            case["env"] = env
        out.append(case)
    with open(out_path, "w") as f:
        json.dump({"jinja2": jinja2.__version__, "cases": out}, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
