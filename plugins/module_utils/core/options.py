# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options declared once (standard library only, Python 3.8+).

Each engine (the Python plan behind a role's one module or action call) declares its options in one ``OPTIONS``
mapping, ``{name: declaration}``. At run time the module's ``argument_spec``, the action's ``validate_argument_spec``
and the CLI flags of ``bin/topotune`` are built from it (``argument_spec``, ``add_cli_flags``, ``cli_values``);
``scripts/gen-options`` generates from it the module's ``DOCUMENTATION`` options, the role's
``meta/argument_specs.yml``, ``defaults/main.yml``, the variable table of its ``README.md`` and the option
arguments of its task files (``CONTRIBUTING.md``, "Options").

A declaration holds:

``type``, ``default``, ``choices``, ``elements``, ``required``, ``options`` (suboptions of a ``dict``), ``no_log``
    The module option, as ``AnsibleModule`` reads it.
``description``
    A string or a list of paragraphs in Ansible's markup; ``O(name)`` names another option of the same
    declaration (sub options as ``O(parent.name)``), which the generator turns into the role variable where it
    documents the role.
``cli``
    The option is a flag of a ``bin/topotune`` subcommand: ``{}``, or ``help`` and optionally ``flag`` (default
    ``--<name>`` with ``-`` for ``_``), ``metavar`` and ``default`` (the CLI's, when it is not the option's).
``role``
    How the role variable differs from the option: ``False`` for none (a module-only option such as a file's
    content the role passes from its ``files/``), else a mapping of ``name`` (default ``<role>_<name>``),
    ``type``, ``default``, ``choices``, ``elements``, ``description``, ``default_doc`` (the README's default column),
    ``arg`` (what the role's task passes, default ``"{{ <variable> }}"``; ``False``: passed by hand) and
    ``entries`` (argument specs entries besides ``main`` and the drift entry that list it).
``role_only``
    ``True``: a role variable only (it routes the role's tasks, e.g. ``platform_checks_show``); never a module
    option, a CLI flag or a task argument.
``role_prefix``
    On a ``dict`` option with ``role: False``: its sub options are role variables ``<role>_<role_prefix><sub>``,
    passed as that mapping (role ``kernel_tuning``'s ``tuning`` and ``reboot`` of module ``kernel_runtime``).

``argument_spec(declared)``
    The ``AnsibleModule`` argument spec: every option but the role-only ones, only the keys ``AnsibleModule``
    reads, sub options included; a new copy.
``defaults(declared)``
    ``{name: default}`` of the module options (``None`` without one), copies.
``role_variables(declared, role, prefix="")``
    ``{option: variable}`` of every option that has a role variable (``"tuning.sysctl"`` for a sub option).
``add_cli_flags(parser, declared)``, ``cli_values(args, declared, read_mapping)``
    The ``argparse`` flags of the options with ``cli`` (destination: the option's name) and the options their
    values give; ``read_mapping(path, flag)`` reads a ``dict`` option's file.
"""

import copy

SPEC_KEYS = ("type", "default", "choices", "elements", "required", "no_log", "aliases")
DECLARATION_KEYS = SPEC_KEYS + ("options", "description", "cli", "role", "role_only", "role_prefix")
ROLE_KEYS = ("name", "type", "default", "choices", "elements", "description", "default_doc", "arg", "entries")


def module_options(declared):
    """The ``(name, declaration)`` pairs that are module options (not role-only), in declaration order."""
    return [(name, option) for name, option in declared.items() if not option.get("role_only")]


def argument_spec(declared):
    spec = {}
    for name, option in module_options(declared):
        entry = {key: copy.deepcopy(option[key]) for key in SPEC_KEYS if key in option}
        entry.setdefault("type", "str")
        if "options" in option:
            entry["options"] = argument_spec(option["options"])
        spec[name] = entry
    return spec


def defaults(declared):
    return {name: copy.deepcopy(option.get("default")) for name, option in module_options(declared)}


def _role(option):
    role = option.get("role")
    return {} if role is None else role


def role_variables(declared, role, prefix=""):
    found = {}
    for name, option in declared.items():
        settings = _role(option)
        if settings is not False:
            found[name] = settings.get("name") or "%s_%s%s" % (role, prefix, name)
        elif "role_prefix" in option:
            subs = role_variables(option.get("options") or {}, role, prefix + option["role_prefix"])
            found.update(("%s.%s" % (name, sub), variable) for sub, variable in subs.items())
    return found


def _flag(name, cli):
    return cli.get("flag") or "--" + name.replace("_", "-")


def add_cli_flags(parser, declared):
    for name, option in module_options(declared):
        cli = option.get("cli")
        if cli is None:
            continue
        kind, flag, text = option.get("type", "str"), _flag(name, cli), cli.get("help")
        if kind == "list":
            parser.add_argument(flag, dest=name, action="append", default=None, metavar=cli.get("metavar", "VALUE"),
                                type=int if option.get("elements") == "int" else str, help=text)
        elif kind == "dict":
            parser.add_argument(flag, dest=name, metavar=cli.get("metavar", "FILE"), help=text)
        elif kind == "bool":
            # a flag turns the default over: --x for a false default, --no-x for a true one
            parser.add_argument(flag, dest=name, action="store_false" if option.get("default") else "store_true",
                                help=text)
        else:
            extra = {"choices": list(option["choices"])} if option.get("choices") else {}
            if cli.get("metavar"):
                extra["metavar"] = cli["metavar"]
            parser.add_argument(flag, dest=name, type=int if kind == "int" else str,
                                default=cli.get("default", option.get("default")), help=text, **extra)


def cli_values(args, declared, read_mapping):
    values = {}
    for name, option in module_options(declared):
        cli = option.get("cli")
        if cli is None:
            continue
        value = getattr(args, name)
        if option.get("type") == "list":
            value = value if value else copy.deepcopy(cli.get("default", option.get("default")) or [])
        elif option.get("type") == "dict":
            value = read_mapping(value, _flag(name, cli)) if value else copy.deepcopy(option.get("default") or {})
        values[name] = value
    return values
