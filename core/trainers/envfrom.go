package trainers

import (
	"fmt"
	"slices"
	"strings"

	"github.com/trainstep/trainstep/core/step"
)

// EnvFromDir is where trainstep mounts each pod.envFrom Secret or ConfigMap (…/0, …/1, in order).
// No Trainer release carries envFrom to the trainer container, so trainstep mounts the object as
// a volume and the command script exports its keys. EnvFromDirEnv overrides it (tests).
const (
	EnvFromDir    = step.EnvFromDir
	EnvFromDirEnv = "TRAINSTEP_ENV_FROM_DIR"
)

// EnvFromPrelude is the bash that exports every key of the mounted objects as Kubernetes' envFrom
// would: prefix + key; keys that are no valid variable name skipped; among sources the last one
// wins; values byte for byte, trailing newlines included. Only the container's own env (own: the
// names its env list will hold) wins over envFrom, so a name the image's ENV or bash itself set is
// overwritten, as it is when Kubernetes builds the container's environment. A name bash keeps
// read-only (UID, EUID, PPID, …) is left to bash: under Kubernetes the variable would reach bash's
// environment and bash would still use its own.
func EnvFromPrelude(prefixes, own []string) string {
	var b strings.Builder
	skip := ""
	if names := validEnvNames(own); len(names) > 0 {
		skip = fmt.Sprintf("    case \"$__ts_n\" in %s) continue ;; esac\n", strings.Join(names, "|"))
	}
	for i, prefix := range prefixes {
		fmt.Fprintf(&b, `for __ts_f in "${%s:-%s}/%d"/*; do
    [ -f "$__ts_f" ] || continue
    __ts_n=%s"${__ts_f##*/}"
    case "$__ts_n" in ''|[0-9]*|*[!A-Za-z0-9_]*) continue ;; esac
%s    __ts_v="$(cat "$__ts_f"; printf x)"
    export "$__ts_n=${__ts_v%%x}" 2>/dev/null || :
done
`, EnvFromDirEnv, EnvFromDir, i, shellQuote(prefix), skip)
	}
	if b.Len() > 0 {
		b.WriteString("unset __ts_f __ts_n __ts_v\n")
	}
	return b.String()
}

// validEnvNames keeps the names a bash case pattern can hold literally, sorted and unique.
func validEnvNames(names []string) []string {
	var out []string
	for _, n := range names {
		if n != "" && !strings.ContainsFunc(n, func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_'
		}) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// PrependToScript puts prelude at the start of the command's bash script: a command that ends
// with bash -c <script> (every function trainer's, or a container's written that way). It
// reports false, changing nothing, for any other command.
func PrependToScript(p *Parts, prelude string) bool {
	n := len(p.Command)
	if n < 3 || p.Command[n-3] != "bash" || p.Command[n-2] != "-c" {
		return false
	}
	p.Command[n-1] = prelude + p.Command[n-1]
	return true
}
