// Package dashboard reads the PromQL of a Grafana dashboard (docs/grafana/trainstep.json) and
// checks that every metric it queries is one an exporter serves: a test scrapes the exporter's
// /metrics and hands its names to Check, so a renamed series fails the test, naming the panel.
package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Query is one PromQL expression of a dashboard and where it is: a panel's title, or a template
// variable's name.
type Query struct {
	Where, Expr string
}

// dashboard is what Queries reads of Grafana's dashboard JSON.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	// Panels are a collapsed row's.
	Panels []panel `json:"panels"`
}

// labelValues is a template variable's label_values(metric, label) query.
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

// Queries lists every PromQL expression of a dashboard: its panels' targets, rows' panels
// included, and its query variables' queries (label_values' metric selector).
func Queries(raw []byte) ([]Query, error) {
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("reading the dashboard's JSON: %w", err)
	}
	var qs []Query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) != "" {
					qs = append(qs, Query{Where: "panel " + p.Title, Expr: t.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		if sub := labelValues.FindStringSubmatch(q); sub != nil {
			q = sub[1]
		}
		if strings.TrimSpace(q) != "" {
			qs = append(qs, Query{Where: "variable " + v.Name, Expr: q})
		}
	}
	return qs, nil
}

// keywords are PromQL's words that are no metric: binary operators, modifiers, literals, and
// the aggregation operators, whose "(" may come after a by or without clause.
var keywords = []string{"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
	"group_right", "bool", "offset", "inf", "nan", "atan2",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
	"topk", "quantile", "limitk", "limit_ratio"}

// nameMatcher finds a selector's metric name given as a label matcher.
var nameMatcher = regexp.MustCompile(`__name__\s*=\s*"([^"]+)"`)

// grouping are the keywords a parenthesised list of label names follows.
var grouping = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// MetricNames are the metric names expr selects, in order, each once: the identifiers that are
// neither a function or aggregation (followed by "("), a keyword, a label (inside {}, or in
// a by/without/on/ignoring/group_* list) nor a Grafana variable ($x, ${x}, [[x]]), outside
// strings and ranges. A selector written {__name__="m"} names m.
func MetricNames(expr string) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	skipGroup := false
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			end := closing(expr, i, '{', '}')
			if m := nameMatcher.FindStringSubmatch(expr[i:end]); m != nil {
				add(m[1])
			}
			i = end
		case c == '[':
			i = closing(expr, i, '[', ']')
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				i = closing(expr, i, '{', '}')
				continue
			}
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case c == '(' && skipGroup:
			i = closing(expr, i, '(', ')')
			skipGroup = false
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			next := strings.TrimLeft(expr[j:], " \t\n")
			switch {
			case slices.Contains(grouping, strings.ToLower(word)):
				skipGroup = true
			case slices.Contains(keywords, strings.ToLower(word)):
			case strings.HasPrefix(next, "("):
			default:
				add(word)
			}
			i = j
		case c >= '0' && c <= '9' || c == '.':
			// A number, or a duration after offset: digits and unit letters together.
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		default:
			i++
		}
	}
	return names
}

func isIdent(c byte, first bool) bool {
	switch {
	case c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return true
	case c >= '0' && c <= '9':
		return !first
	}
	return false
}

// skipString returns the index after the string literal that starts at i.
func skipString(s string, i int) int {
	quote := s[i]
	for i++; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quote != '`':
			i++
		case s[i] == quote:
			return i + 1
		}
	}
	return len(s)
}

// closing returns the index after the bracket that closes the one at i, strings skipped.
func closing(s string, i int, opening, closer byte) int {
	depth := 0
	for i < len(s) {
		switch c := s[i]; c {
		case '"', '\'', '`':
			i = skipString(s, i)
			continue
		case opening:
			depth++
		case closer:
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return len(s)
}

// Served are the metric names an exporter's /metrics text serves: each family's name, and a
// histogram's or summary's _bucket, _sum and _count series.
func Served(metrics io.Reader) (map[string]bool, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(metrics)
	if err != nil {
		return nil, fmt.Errorf("parsing the /metrics text: %w", err)
	}
	served := map[string]bool{}
	for name, f := range families {
		served[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			served[name+"_bucket"], served[name+"_sum"], served[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			served[name+"_sum"], served[name+"_count"] = true, true
		}
	}
	return served, nil
}

// ServedText is Served of a /metrics body.
func ServedText(body []byte) (map[string]bool, error) { return Served(bytes.NewReader(body)) }

// Scrape is Served of what an exporter serves at url, read over HTTP as Prometheus reads it.
func Scrape(ctx context.Context, url string) (map[string]bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", url, res.Status)
	}
	return Served(res.Body)
}

// Check returns one error for each metric a query of the dashboard selects that served lacks,
// and one for a query that selects no metric at all (a typo in a function's name reads as one).
func Check(raw []byte, served map[string]bool) []error {
	qs, err := Queries(raw)
	if err != nil {
		return []error{err}
	}
	if len(qs) == 0 {
		return []error{fmt.Errorf("the dashboard has no queries")}
	}
	var errs []error
	for _, q := range qs {
		names := MetricNames(q.Expr)
		if len(names) == 0 {
			errs = append(errs, fmt.Errorf("%s: %q selects no metric", q.Where, q.Expr))
		}
		for _, n := range names {
			if !served[n] {
				errs = append(errs, fmt.Errorf("%s: metric %s is not served (query %q)", q.Where, n, q.Expr))
			}
		}
	}
	return errs
}
