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
	// Containers is how many containers (init containers included) the runtime's trainer pod
	// has; the return value is kept to what the kubelet reports whole for such a pod
	// (ResultLimit). 0 counts as 1.
	Containers int
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
	return src + "\n\n\n" + reporter + "\n\n\n" + checkpointer + "\n\n\n" + s.writer() + "\n\n_trainstep_resume()\n_trainstep_write_result(" + call + ")\n", nil
}

// ResultMarker wraps the return value in the termination message: {"trainstep.dev/result": v}.
const ResultMarker = "trainstep.dev/result"

// ResultFileEnv points the return value somewhere else than the termination message (the local
// backend sets it to a file per node).
const ResultFileEnv = "TRAINSTEP_RESULT_FILE"

// MaxResult is the most of a container's termination message the kubelet reads
// (kubecontainer.MaxContainerTerminationMessageLength: the last 4096 bytes of the file).
const MaxResult = 4096

// PodTerminationMessages is what the kubelet keeps of all of a pod's termination messages
// together (kubecontainer.MaxPodTerminationMessageLogLength): its status manager cuts each
// container's message to its first 12288 ÷ n bytes, n counting the pod's containers, init
// containers (sidecars included) and ephemeral containers (pkg/kubelet/status normalizeStatus).
const PodTerminationMessages = 12 * 1024

// InjectedContainers is the room the result limit leaves for containers added to the pod after
// trainstep plans it, which it cannot know: a service mesh's init container and proxy (Istio's
// istio-init and istio-proxy) are the common case. A pod with more is caught when the result is
// read (trainjob.ReadResult): the cut message fails the step by name.
const InjectedContainers = 2

// ResultLimit is the longest termination message the kubelet keeps whole on a pod of
// containers containers (init containers included) once InjectedContainers more are added.
func ResultLimit(containers int) int {
	return min(MaxResult, PodTerminationMessages/(max(containers, 1)+InjectedContainers))
}

// resultWriter writes the function's return value on rank 0 to the container's termination
// message as {"trainstep.dev/result": <value>} (trainjob.ReadResult reads it), and the
// checkpoint the function resumed from as "trainstep.dev/resumed-from"; None writes no result.
// The value is converted to JSON value by value, so one odd value never costs the
// others their result-<key> output:
//   - NaN, Infinity and -Infinity become the strings "NaN", "Infinity", "-Infinity" (proto3's
//     JSON spelling, which KFP uses, and what Python's float(), Go's ParseFloat and JavaScript's
//     Number() read back; JSON has no such numbers, and null would read back as no value);
//   - numpy scalars, 0-d and n-d arrays, torch and jax tensors (anything with tolist() or
//     item()) become the Python numbers and lists they hold;
//   - tuples become lists, sets and frozensets sorted lists (in iteration order if unsortable),
//     bytes the text they hold when it is UTF-8;
//   - a dict key becomes a string as json.dumps spells it (1 → "1", True → "true", None →
//     "null"); two keys that become the same string fail the node naming both;
//   - anything else (an object, bytes that are not UTF-8) becomes its repr() string and is
//     listed, by key, in the log and in "trainstep.dev/unconverted", which the step's message
//     repeats as a warning.
//
// Each conversion is logged on the node. A message over the limit fails the node with a
// message that says to return a URI.
var resultWriter = `def _trainstep_write_result(value):
    import json, math, os, sys
    rank = "0"
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "JAX_PROCESS_ID", "DMLC_TASK_ID"):
        if os.environ.get(name):
            rank = os.environ[name]
            break
    resumed = os.environ.get("` + step.ResumeFromEnv + `")
    if rank != "0" or (value is None and not resumed):
        return
    notes, unconverted = [], []

    def where(path):
        return path or "the return value"

    def number(x, path):
        if math.isnan(x) or math.isinf(x):
            s = "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
            notes.append('%s: %s is written as the string "%s" (JSON has no such number)' % (where(path), s, s))
            return s
        return x

    def key(k, path):
        if isinstance(k, str):
            return k
        if isinstance(k, (bytes, bytearray)):
            try:
                return bytes(k).decode("utf-8")
            except UnicodeDecodeError:
                pass
        elif k is None or isinstance(k, (bool, int, float)):
            return json.dumps(number(float(k), path) if isinstance(k, float) else k).strip('"')
        elif callable(getattr(k, "item", None)):
            try:
                return key(k.item(), path)
            except Exception:
                pass
        unconverted.append("%s: key %r" % (where(path), k))
        return str(k)

    def plain(v, path, depth):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return number(float(v), path)
        if depth > 100:
            unconverted.append(where(path))
            return repr(v)
        if isinstance(v, dict):
            out, first = {}, {}
            for k, x in v.items():
                s = key(k, path)
                if s in first:
                    sys.exit('trainstep: %s has the keys %r and %r, which are both "%s" in JSON; rename one of them' % (
                        where(path), first[s], k, s))
                first[s] = k
                out[s] = plain(x, path + "." + s if path else s, depth + 1)
            return out
        if isinstance(v, (list, tuple)):
            return [plain(x, "%s[%d]" % (path, i), depth + 1) for i, x in enumerate(v)]
        if isinstance(v, (set, frozenset)):
            items = list(v)
            try:
                items.sort()
            except TypeError:
                pass
            notes.append("%s: a %s is written as a list" % (where(path), type(v).__name__))
            return [plain(x, "%s[%d]" % (path, i), depth + 1) for i, x in enumerate(items)]
        if isinstance(v, (bytes, bytearray)):
            try:
                return bytes(v).decode("utf-8")
            except UnicodeDecodeError:
                pass
        else:
            for method in ("tolist", "item"):
                f = getattr(v, method, None)
                if callable(f):
                    try:
                        x = f()
                    except Exception:
                        continue
                    if type(x) is not type(v):
                        return plain(x, path, depth + 1)
        unconverted.append(where(path))
        return repr(v)

    body = {} if value is None else {"` + ResultMarker + `": plain(value, "", 0)}
    for n in notes:
        print("trainstep: result " + n, file=sys.stderr)
    for u in unconverted:
        print("trainstep: result %s has no JSON form; it is written as its repr() string" % u, file=sys.stderr)
    if unconverted:
        body["` + UnconvertedMarker + `"] = unconverted
    if resumed:
        body["` + ResumedFromMarker + `"] = resumed
    data = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(data) > @LIMIT@:
        sys.exit("trainstep: the training function returned %d bytes as JSON, over the @LIMIT@ this pod's termination message holds (@DETAIL@); write large results to storage and return their URI, e.g. {'model_uri': 's3://bucket/model'}" % len(data))
    path = os.environ.get("` + ResultFileEnv + `") or "/dev/termination-log"
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        print("trainstep: could not write the return value to %s: %s" % (path, e), file=sys.stderr)`

// ResumedFromMarker is, next to the result in the termination message, the checkpoint the
// script offered the function ($TRAINSTEP_RESUME_FROM): how a face learns what a step on a
// cluster resumed from.
const ResumedFromMarker = "trainstep.dev/resumed-from"

// UnconvertedMarker lists, next to the result in the termination message, the values the script
// wrote as their repr() because they have no JSON form.
const UnconvertedMarker = "trainstep.dev/unconverted"

// writer is resultWriter for a pod of containers containers.
func (s Script) writer() string {
	n := max(s.Containers, 1)
	detail := fmt.Sprintf("the kubelet keeps 12288 bytes of a pod's termination messages, split evenly between its containers: %d planned + %d for a service mesh's sidecars, 4096 at most", n, InjectedContainers)
	return strings.NewReplacer("@LIMIT@", fmt.Sprint(ResultLimit(n)), "@DETAIL@", detail).Replace(resultWriter)
}

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
