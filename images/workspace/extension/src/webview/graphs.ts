/**
 * The Driver Station page's graphs (its Graphs section): the student picks numeric and boolean
 * topics of the robot's NetworkTables, each drawn on its own plot (uPlot) against time, all over the
 * same time window, their cursors together. One plot per topic, not several lines on one: topics
 * have their own units and ranges (a speed of 3 m/s would flatten a boolean's 0 and 1, an encoder's
 * thousands a speed), and each keeps its own scale. Booleans are 0 and 1 drawn as "false" and "true".
 *
 * The samples come from the extension (ds-view.ts DashboardMessage) into a ring per topic
 * (../graphs.ts SampleRing: bounded); the plots are redrawn at most every DRAW_MS while the page is
 * visible. Paused, the plots hold what they show and the rings keep filling; resumed, they show the
 * window up to now. The picks and the window are the extension's to remember: they come from it
 * (`remembered`) and go to it (`send`).
 *
 * For the tests (and anyone curious), each plot's figure says in data attributes what it received
 * (`data-received`: how many samples, `data-last`: the latest value) and what it shows
 * (`data-shown-last`: the value at the window's end, `data-shown-to`: that end's time in ms).
 */
import uPlot from 'uplot';
import { DEFAULT_GRAPHS, MAX_GRAPHS, SampleRing, type GraphSettings, type GraphTopic, type SampleBatch, type WindowSeconds } from '../graphs.ts';

/** The plots are redrawn at most this often (20 a second). */
const DRAW_MS = 50;
const PLOT_HEIGHT = 130;
/** The series' colours: the theme's chart colours (VS Code's `charts.*`), these where a theme has none. */
const CHART_COLORS: [string, string][] = [
  ['--vscode-charts-blue', '#3794ff'],
  ['--vscode-charts-orange', '#d18616'],
  ['--vscode-charts-green', '#89d185'],
  ['--vscode-charts-purple', '#b180d7'],
  ['--vscode-charts-red', '#f14c4c'],
  ['--vscode-charts-yellow', '#cca700'],
];

interface Graph {
  name: string;
  type: string;
  ring: SampleRing;
  figure: HTMLElement;
  value: HTMLElement;
  holder: HTMLElement;
  plot: uPlot | null;
}

/** The Graphs section: `send` tells the extension the student's picks. */
export function graphs(send: (settings: GraphSettings) => void): {
  remembered: (settings: GraphSettings) => void;
  received: (graphable: GraphTopic[], samples: SampleBatch[]) => void;
} {
  const element = (id: string) => document.getElementById(id)!;
  const section = element('graphs');
  const list = element('graph-list');
  const topicList = element('graph-topic-list');
  const pause = element('graphs-pause') as HTMLButtonElement;
  let settings = DEFAULT_GRAPHS;
  /** Every topic that can be graphed, by name: its type. */
  let topics = new Map<string, string>();
  const shown = new Map<string, Graph>();
  /** When the plots were paused (their window's end), null while they follow the robot. */
  let pausedAt: number | null = null;

  const change = (next: GraphSettings) => {
    settings = next;
    send(settings);
    sync();
  };

  for (const button of section.querySelectorAll<HTMLButtonElement>('[data-window]')) {
    button.addEventListener('click', () => change({ ...settings, windowSeconds: Number(button.dataset['window']) as WindowSeconds }));
  }
  pause.addEventListener('click', () => {
    pausedAt = pausedAt === null ? Date.now() : null;
    renderControls();
    drawAll();
  });

  /** The graphs, the topic list and the controls as `settings` says. */
  function sync(): void {
    for (const [name, graph] of shown) {
      if (settings.topics.includes(name)) continue;
      graph.plot?.destroy();
      graph.figure.remove();
      shown.delete(name);
    }
    settings.topics.forEach((name, index) => {
      const graph = shown.get(name) ?? addGraph(name);
      // In the order picked.
      if (list.children[index] !== graph.figure) list.insertBefore(graph.figure, list.children[index] ?? null);
    });
    renderControls();
    renderTopics();
    drawAll();
  }

  function addGraph(name: string): Graph {
    const figure = Object.assign(document.createElement('figure'), { className: 'graph' });
    figure.dataset['topic'] = name;
    const head = Object.assign(document.createElement('figcaption'), { className: 'graph-head' });
    const title = Object.assign(document.createElement('span'), { className: 'graph-name', textContent: name, title: name });
    const value = Object.assign(document.createElement('span'), { className: 'graph-value', textContent: '–' });
    const remove = Object.assign(document.createElement('button'), {
      type: 'button',
      className: 'link graph-remove',
      textContent: '✕',
      title: `Stop graphing ${name}`,
    });
    remove.setAttribute('aria-label', `Stop graphing ${name}`);
    remove.addEventListener('click', () => change({ ...settings, topics: settings.topics.filter((topic) => topic !== name) }));
    head.append(title, value, remove);
    const holder = Object.assign(document.createElement('div'), { className: 'graph-plot' });
    figure.append(head, holder);
    const graph: Graph = { name, type: topics.get(name) ?? 'double', ring: new SampleRing(), figure, value, holder, plot: null };
    shown.set(name, graph);
    return graph;
  }

  /** The theme's colours, read when a plot is made (and made again when the theme changes). */
  function theme(): { text: string; grid: string; font: string; colors: string[] } {
    const style = getComputedStyle(document.body);
    const variable = (name: string, otherwise: string) => style.getPropertyValue(name).trim() || otherwise;
    const dark = !document.body.classList.contains('vscode-light');
    return {
      text: variable('--vscode-descriptionForeground', dark ? '#ccccccb3' : '#616161'),
      // Faint lines, in the theme's contrast: the plot stands out.
      grid: dark ? 'rgba(200, 200, 200, 0.14)' : 'rgba(60, 60, 60, 0.14)',
      font: `11px ${style.fontFamily || 'sans-serif'}`,
      colors: CHART_COLORS.map(([name, otherwise]) => variable(name, otherwise)),
    };
  }

  function makePlot(graph: Graph): void {
    graph.plot?.destroy();
    const { text, grid, font, colors } = theme();
    const boolean = graph.type === 'boolean';
    const axis = { stroke: text, font, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    graph.plot = new uPlot(
      {
        width: Math.max(graph.holder.clientWidth, 120),
        height: PLOT_HEIGHT,
        legend: { show: false },
        cursor: { sync: { key: 'driver-station-graphs' }, drag: { x: false, y: false }, points: { show: false } },
        scales: {
          x: { time: false, range: () => [-settings.windowSeconds, 0] },
          y: boolean ? { range: [-0.15, 1.15] } : {},
        },
        axes: [
          { ...axis, size: 28, values: (_, splits) => splits.map((seconds) => (seconds === 0 ? (pausedAt === null ? 'now' : 'paused') : `${seconds} s`)) },
          boolean
            ? { ...axis, size: 48, splits: () => [0, 1], values: (_, splits) => splits.map((value) => (value === 1 ? 'true' : 'false')) }
            : { ...axis, size: 48, space: 20 },
        ],
        series: [
          {},
          { stroke: colors[settings.topics.indexOf(graph.name) % colors.length], width: 2, paths: uPlot.paths.stepped!({ align: 1 }), points: { show: false } },
        ],
        hooks: { setCursor: [(plot) => renderValue(graph, plot.cursor.idx ?? null)] },
      },
      [[], []],
      graph.holder,
    );
  }

  const format = (graph: Graph, value: number | null | undefined) =>
    value === null || value === undefined ? '–' : graph.type === 'boolean' ? String(value === 1) : String(Number(value.toFixed(3)));

  /** The value under the cursor, else the value at the window's end. */
  function renderValue(graph: Graph, index: number | null): void {
    const ys = graph.plot?.data[1] ?? [];
    graph.value.textContent = format(graph, index === null ? ys.at(-1) : ys[index]);
  }

  function drawAll(): void {
    const to = pausedAt ?? Date.now();
    for (const graph of shown.values()) {
      if (!graph.plot) makePlot(graph);
      const [xs, ys] = graph.ring.window(settings.windowSeconds, to);
      graph.plot!.setData([xs, ys]);
      renderValue(graph, graph.plot!.cursor.idx ?? null);
      graph.figure.dataset['shownLast'] = String(ys.at(-1) ?? '');
      graph.figure.dataset['shownTo'] = String(to);
    }
  }

  let lastDraw = 0;
  const frame = (time: number) => {
    requestAnimationFrame(frame);
    if (pausedAt !== null || shown.size === 0 || time - lastDraw < DRAW_MS) return;
    lastDraw = time;
    drawAll();
  };
  requestAnimationFrame(frame);

  new ResizeObserver(() => {
    for (const graph of shown.values()) graph.plot?.setSize({ width: Math.max(graph.holder.clientWidth, 120), height: PLOT_HEIGHT });
  }).observe(list);
  // Another theme: the plots made again in its colours.
  new MutationObserver(() => {
    for (const graph of shown.values()) makePlot(graph);
    drawAll();
  }).observe(document.body, { attributes: true, attributeFilter: ['class'] });

  function renderControls(): void {
    for (const button of section.querySelectorAll<HTMLButtonElement>('[data-window]'))
      button.setAttribute('aria-checked', String(Number(button.dataset['window']) === settings.windowSeconds));
    pause.textContent = pausedAt === null ? 'Pause' : 'Resume';
    pause.setAttribute('aria-pressed', String(pausedAt !== null));
    section.dataset['paused'] = String(pausedAt !== null);
    element('graphs-empty').hidden = shown.size > 0;
  }

  let topicsShown = '';
  /** The topics to pick from (every graphable one, and those picked that the robot does not publish now), each ticked if picked. */
  function renderTopics(): void {
    const names = [...new Set([...topics.keys(), ...settings.topics])].toSorted((a, b) => a.localeCompare(b));
    const signature = JSON.stringify(names.map((name) => [name, topics.get(name)]));
    // Made again only when the topics changed (a box keeps the focus when it is ticked).
    if (signature !== topicsShown) {
      topicsShown = signature;
      topicList.replaceChildren(
        ...(names.length === 0
          ? [Object.assign(document.createElement('p'), { className: 'muted', textContent: 'Your robot publishes no numbers or booleans (yet): run it.' })]
          : names.map((name) => {
              const label = document.createElement('label');
              const box = Object.assign(document.createElement('input'), { type: 'checkbox' });
              box.dataset['topic'] = name;
              box.addEventListener('change', () =>
                change({ ...settings, topics: box.checked ? [...settings.topics, name] : settings.topics.filter((topic) => topic !== name) }),
              );
              const type = Object.assign(document.createElement('span'), { className: 'muted', textContent: topics.get(name) ?? 'not published now' });
              label.append(box, Object.assign(document.createElement('span'), { textContent: name }), type);
              return label;
            })),
      );
    }
    const full = settings.topics.length >= MAX_GRAPHS;
    for (const box of topicList.querySelectorAll<HTMLInputElement>('input[data-topic]')) {
      box.checked = settings.topics.includes(box.dataset['topic']!);
      box.disabled = full && !box.checked;
    }
    element('graph-topics-count').textContent = `${settings.topics.length} of ${names.length}${full ? `: at most ${MAX_GRAPHS}` : ''}`;
  }

  return {
    remembered(given) {
      settings = given;
      sync();
    },
    received(graphable, samples) {
      const before = topics;
      topics = new Map(graphable.map((topic) => [topic.name, topic.type]));
      for (const graph of shown.values()) {
        // A remembered topic's type, known once the robot publishes it: the plot made again for it.
        const type = topics.get(graph.name);
        if (type !== undefined && type !== graph.type) {
          graph.type = type;
          graph.plot?.destroy();
          graph.plot = null;
        }
      }
      for (const batch of samples) {
        const graph = shown.get(batch.name);
        if (!graph) continue;
        batch.times.forEach((time, index) => graph.ring.push(time, batch.values[index] ?? null));
        graph.figure.dataset['received'] = String(graph.ring.total);
        graph.figure.dataset['last'] = String(graph.ring.latest()?.value ?? '');
      }
      if (before.size !== topics.size || [...topics].some(([name, type]) => before.get(name) !== type)) renderTopics();
      if (shown.size > 0 && [...shown.values()].some((graph) => !graph.plot)) drawAll();
    },
  };
}
