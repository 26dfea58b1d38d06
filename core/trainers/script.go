package trainers

import (
	"bytes"
	"compress/zlib"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// MaxCommandItem is the longest command item every supported Trainer accepts: v2.2 rejects items
// over 65,536 characters (v2.3 allows 1 MiB, v2.0/2.1 have no limit). It is the limit a Script
// keeps to when the installed Trainer's is not known (Runtime.MaxCommandItem unset).
const MaxCommandItem = 65536

// MaxCommandItemAny is the longest command item any Trainer accepts (v2.3's 1 MiB).
const MaxCommandItemAny = 1 << 20

// MaxExecArg is the longest single argument Linux execve takes (MAX_ARG_STRLEN, 32 pages of 4 KiB,
// the terminating NUL included): a longer command item passes the Trainer and then fails to start
// with "argument list too long". So the usable item is the smaller of this and the Trainer's limit.
const MaxExecArg = 32*4096 - 1

// UsableCommandItem is the longest command item that both the Trainer (its limit, or
// MaxCommandItem when 0) and the kernel take.
func UsableCommandItem(trainerLimit int) int {
	if trainerLimit <= 0 {
		trainerLimit = MaxCommandItem
	}
	return min(trainerLimit, MaxExecArg)
}

// Script is the Go port of the SDK's function script: install packages, write the function and
// its call to a file, start the runtime's entry point on it. It differs from the SDK where the
// SDK is wrong: the heredoc is quoted (no $ or backtick expansion in user code), its delimiter
// cannot occur in the source, and arguments are Python literals.
type Script struct {
	Source    string
	FuncName  string
	FuncArgs  step.Object
	Packages  []string
	IndexURLs []string
	Policy    runtimes.Policy
	// MaxItem is the installed Trainer's command item limit (MaxCommandItem when 0).
	MaxItem int
}

// ScriptDirEnv lets the local backend point the MPI script file at a writable directory; on a
// cluster it is unset and the SDK's /home/mpiuser is used.
const ScriptDirEnv = "TRAINSTEP_SCRIPT_DIR"

var defLine = regexp.MustCompile(`(?m)^(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// TopLevelFunctions lists the functions a source defines at column 0, in order.
func TopLevelFunctions(src string) []string {
	var names []string
	for _, m := range defLine.FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	return names
}

// Command renders the trainer command for the runtime's policy.
func (s Script) Command() ([]string, error) {
	body, err := s.body()
	if err != nil {
		return nil, err
	}
	if s.Policy == runtimes.PolicyMPI {
		return []string{"mpirun", "--hostfile", runtimes.DefaultMPIHostfile, "bash", "-c", body}, nil
	}
	return []string{"bash", "-c", body}, nil
}

func (s Script) file() string {
	name := "trainstep_" + s.FuncName + ".py"
	if s.Policy == runtimes.PolicyMPI {
		return fmt.Sprintf(`"${%s:-%s}/%s"`, ScriptDirEnv, runtimes.DefaultMPIHome, name)
	}
	return `"` + name + `"`
}

func (s Script) entry() string {
	if s.Policy == runtimes.PolicyTorch {
		return "torchrun"
	}
	return "python"
}

func (s Script) program() (string, error) {
	call := s.FuncName + "()"
	if len(s.FuncArgs) > 0 {
		args, err := PyLiteral(s.FuncArgs)
		if err != nil {
			return "", err
		}
		call = s.FuncName + "(**" + args + ")"
	}
	src := strings.TrimRight(dedent(s.Source), "\n")
	return src + "\n\n\n" + resultWriter + "\n\n_trainstep_write_result(" + call + ")\n", nil
}

// ResultMarker wraps the return value in the termination message: {"trainstep.dev/result": v}.
const ResultMarker = "trainstep.dev/result"

// ResultFileEnv points the return value somewhere else than the termination message (the local
// backend sets it to a file per node).
const ResultFileEnv = "TRAINSTEP_RESULT_FILE"

// MaxResult is what a container's termination message holds; the kubelet truncates the rest.
const MaxResult = 4096

// resultWriter writes the function's return value on rank 0 to the container's termination
// message as {"trainstep.dev/result": <value>} (trainjob.ParseResult reads it). None writes
// nothing; a value json.dumps refuses (a set, a tensor, NaN) is written as its repr() string;
// a value over MaxResult bytes fails the node with a message that says to return a URI.
var resultWriter = `def _trainstep_write_result(value):
    import json, os, sys
    rank = "0"
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "JAX_PROCESS_ID", "DMLC_TASK_ID"):
        if os.environ.get(name):
            rank = os.environ[name]
            break
    if rank != "0" or value is None:
        return
    try:
        body = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        body = json.dumps(repr(value), ensure_ascii=False)
        print("trainstep: the return value is not JSON; the step's result is its repr() as a JSON string", file=sys.stderr)
    data = ('{"` + ResultMarker + `":' + body + "}").encode("utf-8")
    if len(data) > ` + fmt.Sprint(MaxResult) + `:
        sys.exit("trainstep: the training function returned %d bytes as JSON, over the ` + fmt.Sprint(MaxResult) + ` a termination message holds; write large results to storage and return their URI, e.g. {'model_uri': 's3://bucket/model'}" % len(data))
    path = os.environ.get("` + ResultFileEnv + `") or "/dev/termination-log"
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        print("trainstep: could not write the return value to %s: %s" % (path, e), file=sys.stderr)`

func (s Script) body() (string, error) {
	prog, err := s.program()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(s.pipBlock())
	file := s.file()
	delim := delimiter(prog)
	fmt.Fprintf(&b, "cat > %s <<'%s'\n%s%s\n", file, delim, prog, delim)
	fmt.Fprintf(&b, "exec %s %s\n", s.entry(), file)
	limit := UsableCommandItem(s.MaxItem)
	if b.Len() <= limit {
		return b.String(), nil
	}
	// Too big for one command item: ship the program compressed and let Python unpack it.
	packed, err := compress(prog)
	if err != nil {
		return "", err
	}
	b.Reset()
	b.WriteString(s.pipBlock())
	fmt.Fprintf(&b, "python -c 'import base64,sys,zlib; open(sys.argv[1],\"wb\").write(zlib.decompress(base64.b64decode(sys.argv[2])))' %s '%s'\n", file, packed)
	fmt.Fprintf(&b, "exec %s %s\n", s.entry(), file)
	if b.Len() > limit {
		return "", fmt.Errorf("the function and its arguments make a %d-character command even compressed, over the %d the installed Trainer and Linux's per-argument limit accept in one command item (Trainer v2.2: 65536, v2.3: 1 MiB; execve: 131071); move the code into a package (runtimeConfig.packagesToInstall) or an image (trainer.kind: CustomTrainerContainer)", b.Len(), limit)
	}
	return b.String(), nil
}

func compress(s string) (string, error) {
	var buf bytes.Buffer
	w, err := zlib.NewWriterLevel(&buf, zlib.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := w.Write([]byte(s)); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// delimiter picks a heredoc end marker that is no line of the program.
func delimiter(prog string) string {
	sum := sha256.Sum256([]byte(prog))
	d := fmt.Sprintf("TRAINSTEP_EOF_%x", sum[:4])
	for strings.Contains("\n"+prog+"\n", "\n"+d+"\n") {
		d += "_"
	}
	return d
}

func (s Script) pipBlock() string {
	if len(s.Packages) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("if ! python -m pip --version >/dev/null 2>&1; then\n    python -m ensurepip >/dev/null 2>&1 || python -m ensurepip --user >/dev/null 2>&1\nfi\n")
	b.WriteString("PACKAGES=(")
	for i, p := range s.Packages {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellQuote(p))
	}
	b.WriteString(")\nPIP_OPTS=(")
	for i, u := range s.IndexURLs {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i == 0 {
			b.WriteString("--index-url " + shellQuote(u))
		} else {
			b.WriteString("--extra-index-url " + shellQuote(u))
		}
	}
	b.WriteString(`)
LOG_FILE="$(mktemp)"
if PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 python -m pip install --quiet --no-warn-script-location "${PIP_OPTS[@]}" --user "${PACKAGES[@]}" >"$LOG_FILE" 2>&1; then
    echo "Successfully installed Python packages (user): ${PACKAGES[*]}"
elif PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 python -m pip install --quiet --no-warn-script-location "${PIP_OPTS[@]}" "${PACKAGES[@]}" >>"$LOG_FILE" 2>&1; then
    echo "Successfully installed Python packages (system-wide): ${PACKAGES[*]}"
else
    echo "ERROR: Failed to install Python packages: ${PACKAGES[*]}" >&2
    cat "$LOG_FILE" >&2
    exit 1
fi
`)
	return b.String()
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_.,:/=+@%-]+$`)

func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// dedent removes the indentation common to every non-blank line, like textwrap.dedent.
func dedent(src string) string {
	lines := strings.Split(src, "\n")
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ind := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = ind, false
			continue
		}
		for !strings.HasPrefix(ind, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	if prefix == "" {
		return src
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(lines, "\n")
}
