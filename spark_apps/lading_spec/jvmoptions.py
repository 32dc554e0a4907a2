"""JVM options a tenant may give Spark (``spark.{driver,executor}.{extra,default}JavaOptions``): an allow-list.

Spark's launcher splits these values with
``org.apache.spark.launcher.CommandBuilderUtils.parseOptionString`` (the driver's
spark-submit) and ``org.apache.spark.util.Utils.splitCommandString`` (the
executors' ``SPARK_JAVA_OPT_*``). Both honour quotes; the first lets ``\\``
escape any character, even inside double quotes, and splits on Java's Unicode
whitespace (U+2028, U+3000 ...). A check that splits otherwise (``shlex``)
sees other tokens than the JVM gets: ``"-java\\agent:/a.jar"`` is one harmless
looking token to ``shlex`` and ``-javaagent:/a.jar`` to the JVM.

So the value is checked in two steps, and both must pass:

1. **characters** (:data:`ALLOWED_CHARACTERS`): printable ASCII without quotes or
   backslashes; whitespace is the ASCII space only. On such text every parser
   splits alike (:func:`parse_option_string` is Spark's parser, ported; the tests
   compare it with the real one), so the tokens checked are the tokens the JVM gets;
2. **each token** matches an entry of :data:`ALLOWED` (heap, stack and GC tuning,
   and named ``-D`` system properties), written as templates with placeholders
   (:data:`PLACEHOLDERS`). Tokens that load code, open a debugger or run a command
   (:data:`NEVER`) get an error saying so; no policy can allow them.

docs/security.md lists :data:`ALLOWED` and :data:`NEVER` as written here; a test
keeps the two equal.
"""

from __future__ import annotations

import re
import unicodedata

ALLOWED_CHARACTERS = "ASCII letters, digits, spaces and - _ . : = + / @ (no quotes, backslashes or other characters)"
_CHARACTERS = re.compile(r"[A-Za-z0-9 \-_.:=+/@]*")

# What a placeholder in an ALLOWED template stands for.
PLACEHOLDERS: dict[str, str] = {
    "<size>": r"[1-9][0-9]{0,9}[kKmMgG]?",
    "<n>": r"[0-9]{1,9}",
    "<percent>": r"[0-9]{1,3}(\.[0-9]{1,3})?",
    "<zone>": r"[A-Za-z][A-Za-z0-9_+/-]{0,39}",
    "<charset>": r"(UTF-8|US-ASCII|ISO-8859-1|COMPAT)",
    "<bool>": r"(true|false)",
    "<name>": r"[A-Za-z]{2,8}",
}
# Heap, stack and GC tuning, and named system properties. "±" is "+" or "-".
ALLOWED: tuple[str, ...] = (
    "-Xss<size>", "-Xmn<size>", "-Xms<size>",
    "-XX:MaxMetaspaceSize=<size>", "-XX:MetaspaceSize=<size>", "-XX:MaxDirectMemorySize=<size>",
    "-XX:ReservedCodeCacheSize=<size>", "-XX:CompressedClassSpaceSize=<size>",
    "-XX:InitialRAMPercentage=<percent>", "-XX:MaxRAMPercentage=<percent>", "-XX:MinRAMPercentage=<percent>",
    "-XX:±UseG1GC", "-XX:±UseParallelGC", "-XX:±UseSerialGC", "-XX:±UseZGC", "-XX:±UseShenandoahGC",
    "-XX:MaxGCPauseMillis=<n>", "-XX:G1HeapRegionSize=<size>", "-XX:InitiatingHeapOccupancyPercent=<n>",
    "-XX:G1ReservePercent=<n>", "-XX:ParallelGCThreads=<n>", "-XX:ConcGCThreads=<n>",
    "-XX:±UseStringDeduplication", "-XX:±ParallelRefProcEnabled", "-XX:±UseCompressedOops",
    "-XX:±AlwaysPreTouch", "-XX:±UseNUMA", "-XX:±ExitOnOutOfMemoryError", "-XX:TieredStopAtLevel=<n>",
    "-XX:±TieredCompilation",
    "-Duser.timezone=<zone>", "-Dfile.encoding=<charset>", "-Duser.language=<name>", "-Duser.country=<name>",
    "-Djava.net.preferIPv4Stack=<bool>", "-Djava.net.preferIPv6Addresses=<bool>",
    "-Dio.netty.tryReflectionSetAccessible=<bool>",
)
# Never allowed, whatever a policy says (matched ignoring case, as a prefix of the token): they
# load code, open a debugger or attach API, or run a command. Listed for the error message:
# ALLOWED already excludes them.
NEVER: tuple[str, ...] = (
    "-javaagent", "-agentlib", "-agentpath", "-Xrun", "-Xdebug", "-XX:On", "-XX:+EnableDynamicAgentLoading",
    "-XX:+StartAttachListener", "-Xbootclasspath", "-XX:Flags", "-XX:VMOptionsFile", "-cp", "-classpath",
    "--class-path", "--module-path", "--patch-module", "--upgrade-module-path", "-Djava.system.class.loader",
    "-Dspark.", "-Dlog4j", "-Djava.security", "@",
)


def _template(entry: str) -> re.Pattern[str]:
    out = re.escape(entry).replace("±", "[+-]")
    for name, pattern in PLACEHOLDERS.items():
        out = out.replace(re.escape(name), pattern)
    return re.compile(out)


_ALLOWED = tuple(_template(entry) for entry in ALLOWED)


def check_java_options(value: str) -> str | None:
    """Why the JVM option string ``value`` is refused (naming the option), or ``None``."""
    try:
        as_spark_reads_it = parse_option_string(value)
    except ValueError:
        as_spark_reads_it = []
    for token in as_spark_reads_it:  # the clearest message first: what the JVM would get
        never = _never(token)
        if never is not None:
            return f"never allowed with {token!r}: {never}… loads code, opens a debugger or runs a command " \
                   "in the Spark JVM"
    if not _CHARACTERS.fullmatch(value):
        bad = next(c for c in value if not _CHARACTERS.fullmatch(c))
        return (f"holds the character {_describe(bad)}: JVM options are {ALLOWED_CHARACTERS}, "
                "separated by spaces, so that they reach the JVM exactly as checked")
    for token in value.split(" "):
        if token and not any(pattern.fullmatch(token) for pattern in _ALLOWED):
            return (f"{token!r} is not an allowed JVM option; allowed: heap, stack and GC tuning and named "
                    "system properties (docs/security.md lists them: -Xss<size>, -XX:MaxMetaspaceSize=<size>, "
                    "-XX:+UseG1GC, -Duser.timezone=<zone>, ...)")
    return None


def _never(token: str) -> str | None:
    lowered = token.lower()
    return next((n for n in NEVER if lowered.startswith(n.lower())), None)


def _describe(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")


# --- Spark's parser, ported: the tests compare it with the real one ---------------------------

_JAVA_WHITESPACE_CONTROLS = frozenset({0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F})
_NON_BREAKING = frozenset({0x00A0, 0x2007, 0x202F})


def java_is_whitespace(code_point: int) -> bool:
    """``java.lang.Character.isWhitespace(int)``: Unicode space, line and paragraph separators
    other than the non-breaking ones, and nine ASCII controls."""
    if code_point in _JAVA_WHITESPACE_CONTROLS:
        return True
    if code_point > 0x10FFFF or 0xD800 <= code_point <= 0xDFFF:
        return False
    return unicodedata.category(chr(code_point)) in ("Zs", "Zl", "Zp") and code_point not in _NON_BREAKING


def parse_option_string(value: str) -> list[str]:
    """``CommandBuilderUtils.parseOptionString`` of Spark's launcher, step for step, on UTF-16
    code units as Java strings are (a character outside the BMP is read at both of its units,
    as Spark's loop does). Raises ``ValueError`` where Spark raises IllegalArgumentException."""
    units = _utf16_units(value)
    opts: list[str] = []
    opt: list[int] = []
    in_opt = in_single = in_double = escape_next = has_data = False
    for i in range(len(units)):
        c = _code_point_at(units, i)
        if escape_next:
            opt.append(c)
            escape_next = False
        elif in_opt:
            if c == ord("\\"):
                if in_single:
                    opt.append(c)
                else:
                    escape_next = True
            elif c == ord("'"):
                if in_double:
                    opt.append(c)
                else:
                    in_single = not in_single
            elif c == ord('"'):
                if in_single:
                    opt.append(c)
                else:
                    in_double = not in_double
            elif not java_is_whitespace(c) or in_single or in_double:
                opt.append(c)
            else:
                opts.append(_from_code_points(opt))
                opt = []
                in_opt = has_data = False
        elif c == ord("'"):
            in_single = in_opt = has_data = True
        elif c == ord('"'):
            in_double = in_opt = has_data = True
        elif c == ord("\\"):
            escape_next = in_opt = has_data = True
        elif not java_is_whitespace(c):
            in_opt = has_data = True
            opt.append(c)
    if in_single or in_double or escape_next:
        raise ValueError(f"Invalid option string: {value}")
    if has_data:
        opts.append(_from_code_points(opt))
    return opts


def _utf16_units(value: str) -> list[int]:
    data = value.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def _code_point_at(units: list[int], i: int) -> int:
    high = units[i]
    if 0xD800 <= high <= 0xDBFF and i + 1 < len(units) and 0xDC00 <= units[i + 1] <= 0xDFFF:
        return 0x10000 + ((high - 0xD800) << 10) + (units[i + 1] - 0xDC00)
    return high


def _from_code_points(points: list[int]) -> str:
    return "".join(chr(p) for p in points)
