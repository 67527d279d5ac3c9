package process

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape gets a Prometheus /metrics page (CoreDNS's prometheus plugin,
// mcs-controller's /metrics) and parses it into metric families by name.
func Scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	code, body, err := HTTPGet(ctx, url)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d", url, code)
	}
	return ParseMetrics(body)
}

// ParseMetrics parses the Prometheus text format into metric families.
func ParseMetrics(text string) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return families, nil
}
