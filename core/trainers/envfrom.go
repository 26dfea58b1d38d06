package trainers

import (
	"fmt"
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
// would: prefix + key; keys that are no valid variable name skipped; the container's own env
// wins, and among sources the last one (so they are read last to first, each keeping what is
// already set); values byte for byte, trailing newlines included.
func EnvFromPrelude(prefixes []string) string {
	var b strings.Builder
	for i := len(prefixes) - 1; i >= 0; i-- {
		prefix := prefixes[i]
		fmt.Fprintf(&b, `for __ts_f in "${%s:-%s}/%d"/*; do
    [ -f "$__ts_f" ] || continue
    __ts_n=%s"${__ts_f##*/}"
    case "$__ts_n" in ''|[0-9]*|*[!A-Za-z0-9_]*) continue ;; esac
    [ -n "${!__ts_n+x}" ] && continue
    __ts_v="$(cat "$__ts_f"; printf x)"
    export "$__ts_n=${__ts_v%%x}"
done
`, EnvFromDirEnv, EnvFromDir, i, shellQuote(prefix))
	}
	if b.Len() > 0 {
		b.WriteString("unset __ts_f __ts_n __ts_v\n")
	}
	return b.String()
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
