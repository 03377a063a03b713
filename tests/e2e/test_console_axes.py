"""The console's charts keep every axis label inside the chart: a time axis's tick at (or near)
the end of the window was drawn centred on it and its label's right half cut off by the chart's
edge (the SVG's viewBox). Drawn in Debian's headless Chromium, with the console's own drawChart."""
from .console_support import (  # noqa: F401 - fixtures
    _strict_layer_for_each_test, browser, screenshots, sign_in, stack)

# A chart whose window ends on a round hour (a tick at its very edge) and one ending a minute after
# a tick, then the job page's timeline width: each label's distance to the chart's left and right edge.
DRAW = """
const results = [];
for (const [i, [to, width]] of arguments[0].entries()) {
  const host = document.createElement('div');
  host.style.cssText = `position: fixed; left: 0; top: ${i * 215}px; width: ${width}px; background: #fff; z-index: 9`;
  host.className = 'axes-probe';
  document.body.appendChild(host);
  const from = to - 3600000;
  drawChart(host, from, to, 60000, [
    {key: 'fires', name: 'fires', cls: 'fires', kind: 'bar', points: new Map([[to - 60000, 3]])},
    {key: 'p99', name: 'p99', cls: 'p99', kind: 'line', points: new Map([[from, 1200000], [to - 60000, 5]])}]);
  const svg = host.querySelector('svg').getBoundingClientRect();
  for (const text of host.querySelectorAll('text')) {
    const box = text.getBoundingClientRect();
    results.push([text.textContent, box.left - svg.left, svg.right - box.right]);
  }
}
return results;
"""


def test_every_chart_label_lies_inside_its_chart_whatever_the_windows_end(stack, browser, tmp_path):  # noqa: F811
    sign_in(browser, stack.api_url, "k1")
    hour = 1_893_456_000_000  # 2030-01-01T00:00:00Z: a tick of every span the axis uses
    cases = [(hour, 600), (hour + 60_000, 600), (hour + 30_000, 400), (hour - 20_000, 900)]
    labels = browser.execute_script(DRAW, [[to, width] for to, width in cases])
    assert len(labels) > 20
    outside = [(text, round(left, 1), round(right, 1)) for text, left, right in labels if left < 0 or right < 0]
    assert outside == [], outside
    browser.save_screenshot(str(screenshots(tmp_path) / "console-chart-axis-end.png"))
