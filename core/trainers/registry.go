package trainers

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/step"
)

// Factory decodes a trainer's own fields (strictly) and checks them. framework is the step's
// framework field, which framework-agnostic trainers use for discovery.
type Factory func(framework string, fields json.RawMessage) (Trainer, field.ErrorList)

// Registration is one trainer kind: KEP-285's "Tier 2" extension point in Go.
type Registration struct {
	// Kind is what trainer.kind names, e.g. TorchTrainer.
	Kind string
	// Frameworks are the values of the step's framework field that pick this kind by default.
	Frameworks []string
	// Summary is one line for `executor trainers` and the docs.
	Summary string
	New     Factory
}

// Registry maps trainer kinds and frameworks to factories. It is built explicitly and passed in
// (no init(), no package-level map), so tests and embedders choose what is registered.
type Registry struct {
	byKind      map[string]Registration
	byFramework map[string]string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byKind: map[string]Registration{}, byFramework: map[string]string{}}
}

// Register adds a trainer kind. A kind or default framework registered twice is an error.
func (r *Registry) Register(reg Registration) error {
	if reg.Kind == "" || reg.New == nil {
		return fmt.Errorf("registering a trainer: Kind and New are required")
	}
	if _, dup := r.byKind[reg.Kind]; dup {
		return fmt.Errorf("registering trainer %s: already registered", reg.Kind)
	}
	for _, fw := range reg.Frameworks {
		if other, dup := r.byFramework[fw]; dup {
			return fmt.Errorf("registering trainer %s: framework %q already picks %s", reg.Kind, fw, other)
		}
	}
	r.byKind[reg.Kind] = reg
	for _, fw := range reg.Frameworks {
		r.byFramework[fw] = reg.Kind
	}
	return nil
}

// Kinds lists the registered trainers, sorted by kind.
func (r *Registry) Kinds() []Registration {
	out := make([]Registration, 0, len(r.byKind))
	for _, reg := range r.byKind {
		out = append(out, reg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// Frameworks lists the framework values that pick a trainer.
func (r *Registry) Frameworks() []string {
	out := make([]string, 0, len(r.byFramework))
	for fw := range r.byFramework {
		out = append(out, fw)
	}
	sort.Strings(out)
	return out
}

// Resolve builds the step's trainer: trainer.kind if set, else the kind its framework picks.
func (r *Registry) Resolve(s *step.Spec) (Trainer, field.ErrorList) {
	kind := s.Trainer.Kind
	if kind == "" {
		k, ok := r.byFramework[s.Framework]
		if !ok {
			return nil, field.ErrorList{field.Invalid(field.NewPath("framework"), s.Framework, fmt.Sprintf(
				"no trainer is registered for this framework (registered: %s); to run a function on a runtime labelled %q, set trainer.kind: CustomTrainer",
				strings.Join(r.Frameworks(), ", "), s.Framework))}
		}
		kind = k
	}
	reg, ok := r.byKind[kind]
	if !ok {
		return nil, field.ErrorList{r.unknownKind(kind)}
	}
	return reg.New(s.Framework, s.Trainer.Fields)
}

// sdkKinds are the Kubeflow SDK's trainer classes that are no kind here: the kind that does
// their job, and how their fields are written for it.
var sdkKinds = map[string]struct{ kind, how string }{
	"BuiltinTrainer": {"TorchTuneTrainer", "the SDK's BuiltinTrainer(config=TorchTuneConfig(...)) is trainer.kind: TorchTuneTrainer (or framework: torchtune), " +
		"with TorchTuneConfig's fields in the trainer block itself, not under config: dtype, batchSize, epochs, loss, numNodes, resourcesPerNode, peftConfig, datasetPreprocessConfig " +
		"(trainer.config holds other torchtune overrides)"},
}

// unknownKind refuses a kind no trainer is registered for, naming the registered kind the user
// meant when it is an SDK class or a registered kind in another case (JaxTrainer for JAXTrainer).
func (r *Registry) unknownKind(kind string) *field.Error {
	p := field.NewPath("trainer", "kind")
	if sdk, ok := sdkKinds[kind]; ok {
		if _, here := r.byKind[sdk.kind]; here {
			return field.Invalid(p, kind, sdk.how)
		}
	}
	kinds := make([]string, 0, len(r.byKind))
	for k := range r.byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if strings.EqualFold(k, kind) {
			return field.Invalid(p, kind, fmt.Sprintf("kinds are case-sensitive: write trainer.kind: %s", k))
		}
	}
	return field.NotSupported(p, kind, kinds)
}

// Builtin registers trainstep's own trainers.
func Builtin() *Registry {
	r := NewRegistry()
	for _, reg := range []Registration{
		{Kind: "TorchTrainer", Frameworks: []string{"torch"}, New: newTorch, Summary: "a Python function under torchrun (mlPolicy.torch)"},
		{Kind: "MPITrainer", Frameworks: []string{"mpi"}, New: newMPI, Summary: "a Python function under mpirun (any runtime with mlPolicy.mpi)"},
		{Kind: "DeepSpeedTrainer", Frameworks: []string{"deepspeed"}, New: newDeepSpeed, Summary: "a DeepSpeed function: deepspeed runtimes first, then torch"},
		{Kind: "JAXTrainer", Frameworks: []string{"jax"}, New: newFrameworkFunction("JAXTrainer", "jax"), Summary: "a JAX function (JAX_* env from the Trainer)"},
		{Kind: "XGBoostTrainer", Frameworks: []string{"xgboost"}, New: newFrameworkFunction("XGBoostTrainer", "xgboost"), Summary: "an XGBoost function (DMLC_* env from the Trainer)"},
		{Kind: "CustomTrainer", New: newCustom, Summary: "any Python function on any custom-code runtime, with that runtime's entry point"},
		{Kind: "CustomTrainerContainer", New: newContainer, Summary: "training code baked into an image: image, command, args"},
		{Kind: "TorchTuneTrainer", Frameworks: []string{"torchtune"}, New: newTorchTune, Summary: "the SDK's TorchTuneConfig (LoRA, instruct dataset) and config overrides for a built-in torchtune runtime"},
	} {
		if err := r.Register(reg); err != nil {
			panic(err) // a programming error in this list, caught by every test
		}
	}
	return r
}

// Describe is "TorchTrainer (torch)" style text for messages.
func Describe(t Trainer) string {
	return fmt.Sprintf("%s (%s)", t.Kind(), strings.Join(t.Frameworks(), ", "))
}
