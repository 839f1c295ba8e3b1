"""The converting process: `python -m indexing.convert.child FORMAT` reads the file on standard
input and writes the result as JSON on standard output. It limits its own memory first, imports
no Django, and exits 3 with {"refused": reason} for a file it cannot read."""

from __future__ import annotations

import json
import resource
import sys


def main() -> int:
    fmt, memory_mb = sys.argv[1], int(sys.argv[2])
    limits_json = sys.argv[3] if len(sys.argv) > 3 else "{}"
    from indexing.convert import ConversionRefused, Limits, convert_here, preload

    preload(fmt)  # the libraries load before the limit: it bounds what reading the file costs
    if memory_mb > 0:
        cap = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    data = sys.stdin.buffer.read()
    try:
        converted = convert_here(fmt, data, Limits(**json.loads(limits_json)))
    except ConversionRefused as exc:
        json.dump({"refused": str(exc)}, sys.stdout)
        return 3
    except (MemoryError, OSError) as exc:
        if not isinstance(exc, MemoryError) and "map" not in str(exc) and "memory" not in str(exc).lower():
            json.dump({"refused": f"could not be read ({type(exc).__name__}: {str(exc)[:200]})"}, sys.stdout)
            return 3
        json.dump({"refused": f"needed more than {memory_mb} MB of memory to read (PMD_CONVERT_MEMORY_MB)"},
                  sys.stdout)
        return 3
    except RecursionError:
        json.dump({"refused": "nested too deep to read"}, sys.stdout)
        return 3
    except Exception as exc:  # a converter's library failing on a broken file
        json.dump({"refused": f"could not be read ({type(exc).__name__}: {str(exc)[:200]})"}, sys.stdout)
        return 3
    json.dump({"text": converted.markdown(), "units": converted.units, "warnings": converted.warnings}, sys.stdout,
              ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
