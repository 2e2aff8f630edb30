/**
 * The classroom's editor extension: run the robot code from where the student works, watch it
 * build and boot, see the simulator. A web extension (it runs in the browser, in VS Code's web
 * worker extension host, on the editor's own origin): it talks to the control plane with the
 * browser's credentials for the editor's address (classroom.ts), never from the workspace's
 * container. What it offers:
 *
 * - Run and Stop: the status bar (the run's state at a glance: building, running, how it ended and
 *   why), the command palette, and Ctrl+Alt+R (Cmd+Alt+R on a Mac);
 * - the run's output, live, in the "Robot run" terminal (run-terminal.ts; resumed where it was after
 *   a lost connection or a restarted control plane), and its compile errors as Problems on their files;
 * - the Simulator view (simulator.ts): the simulator's NetworkTables topics and live values;
 * - the Driver Station (driver-station.ts): enable, disable, the mode, the emergency stop, driving
 *   with the keyboard or a gamepad, the robot's autonomous choosers and its field, over WPILib's
 *   HALSim WebSocket (halsim.ts) and NetworkTables (telemetry.ts);
 * - the idle warning: a few minutes before the idle sweep would stop the workspace, a notice with
 *   "Keep working"; and what the student does in the editor (editing, moving around, typing in a
 *   terminal: VS Code's "the window was interacted with recently") counts as activity, told to the
 *   control plane at most once a minute;
 * - a home nearly full (90 % of its bound), full (Run refused) or not measurable in full: a notice,
 *   once each time it becomes so, saying how much is used and how to free space;
 * - a stop, told at once: when a coach, the idle sweep, the operator or the student's own page stops
 *   the workspace, a dialog says who and when (the editor's connection is gone) and that the files are
 *   kept; once the editor is gone the window goes to the workspace page by itself (Open there brings
 *   the editor back): never left under VS Code's own "Disconnected" dialog;
 * - a sign-out (in another tab, or the session ended), told at once: "You are signed out", with Sign
 *   in again (the control plane's sign-in, which returns here), in a dialog and in the status bar;
 * - asking the coach for help (help.ts): "Ask for help" in the status bar and the command palette,
 *   with an optional message; the place in the queue, then the coach coming; take the hand back;
 * - a coach looking over the shoulder (coach-look.ts): "Your coach is looking" in the status bar
 *   while a coach's read-only look lasts, and a notification when one begins; with LOOK_CONSENT=ask,
 *   "Your coach asks to look" first, with "Let them look" and "Not now".
 * - lessons a coach handed out (lessons.ts): a notification once per lesson version that reaches
 *   the home, saying where it is (beside the student's own folder for a later version).
 *
 * The status bar's Run, state, Driver Station and Ask for help are also package.json's
 * `statusBarItems`: the workbench shows them as it paints, before this extension has loaded;
 * activation (`*`) then takes them over, before anything is awaited.
 */
import * as vscode from 'vscode';
import { ApiError, Classroom, isActive, type RunView, type WorkspaceView } from './classroom.ts';
import { CoachLook } from './coach-look.ts';
import { LessonNotices } from './lessons.ts';
import { DriverStation } from './driver-station.ts';
import { HelpHand } from './help.ts';
import { setNt4Base } from './nt4-socket.ts';
import { parseProblems, projectPath } from './problems.ts';
import { RunTerminal } from './run-terminal.ts';
import { SimulatorView } from './simulator.ts';
import { Telemetry } from './telemetry.ts';

/** How often the workspace and its run (and a coach's look) are read (reads do not count as activity). */
const POLL_MS = 2000;
/** The most often the editor tells the control plane that the student is here. */
const ACTIVITY_EVERY_MS = 60_000;
/**
 * How long after a sign-out was noticed the window goes to the sign-in page by itself: before VS
 * Code's own dialog, which comes 40 s after the connection went (the control plane ends it at the
 * sign-out) and would cover the notice.
 */
const SIGNED_OUT_LEAVE_MS = 30_000;
/**
 * How long a stop's dialog stays before the window goes to the workspace page by itself (once the
 * editor is gone): time to read who stopped it, and still well before VS Code's dialog (40 s).
 */
const STOP_SHOWN_MS = 10_000;

/** Who stopped a workspace, in the student's words (as on the workspace page, api/pages/workspace-page.ts). */
const STOPPED_BY = {
  student: 'You stopped your workspace',
  coach: 'Your coach stopped your workspace',
  operator: "The server's operator stopped your workspace",
  idle: 'Your workspace was stopped',
};

/** Why the workspace stopped: by whom, when, and after how long idle. */
function stoppedText(stopped: NonNullable<WorkspaceView['stopped']>): string {
  const at = new Date(stopped.at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  const idle = stopped.by === 'idle' && stopped.afterIdleMinutes !== undefined ? ` after ${stopped.afterIdleMinutes} minutes without activity` : '';
  return `${STOPPED_BY[stopped.by] ?? STOPPED_BY.idle} at ${at}${idle}.`;
}

/** Where the browser reaches this editor, ending in a slash: code-server maps a local port to `<editor>/proxy/<port>/`. */
async function editorBase(): Promise<string> {
  const external = await vscode.env.asExternalUri(vscode.Uri.parse('http://localhost:5810/'));
  return external.toString(true).replace(/proxy\/5810\/$/, '');
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  // The status bar first, before anything is awaited: the same items as package.json's
  // statusBarItems, which the workbench shows before this extension has even loaded.
  const actionItem = vscode.window.createStatusBarItem('classroom.run', vscode.StatusBarAlignment.Left, 1000);
  const stateItem = vscode.window.createStatusBarItem('classroom.state', vscode.StatusBarAlignment.Left, 999);
  actionItem.name = 'Run robot code';
  stateItem.name = 'Robot run';
  stateItem.command = 'classroom.showOutput';
  const help = new HelpHand();
  const look = new CoachLook();
  context.subscriptions.push(actionItem, stateItem, help, look);
  let workspace: WorkspaceView | undefined;
  /** The student API answered 401: this browser is signed out (in another tab, or the session ended). */
  let signedOut = false;
  const render = () => {
    const run = workspace?.run;
    const stopped = workspace && workspace.desiredState !== 'running';
    if (signedOut) {
      actionItem.text = '$(sign-in) Sign in again';
      actionItem.tooltip = 'You are signed out: sign in again to come back to this editor';
      actionItem.command = 'classroom.signIn';
      stateItem.text = '$(account) Signed out';
      stateItem.tooltip = 'You are signed out: Run, Stop and the simulator need you signed in';
    } else if (isActive(run)) {
      actionItem.text = '$(debug-stop) Stop';
      actionItem.tooltip = 'Stop the run (Ctrl+Alt+R runs again)';
      actionItem.command = 'classroom.stop';
      stateItem.text = run.status === 'queued' ? '$(sync~spin) Building…' : '$(pulse) Running';
      stateItem.tooltip =
        run.status === 'queued' ? 'Compiling and starting your robot code: see the Robot run terminal' : 'Your robot code is running in the simulator';
    } else {
      actionItem.text = '$(play) Run';
      actionItem.tooltip = 'Run your robot code (Ctrl+Alt+R)';
      actionItem.command = 'classroom.run';
      if (!workspace) stateItem.text = '$(sync~spin) Robot run';
      else if (stopped) stateItem.text = '$(circle-slash) Workspace stopped';
      else if (!run) stateItem.text = '$(info) Not run yet';
      else if (run.status === 'failed') stateItem.text = `$(error) Run failed: ${run.reason ?? 'see the output'}`;
      else if (run.status === 'canceled') stateItem.text = '$(circle-slash) Run canceled';
      else stateItem.text = `$(check) Run stopped${run.reason ? `: ${run.reason}` : ''}`;
      stateItem.tooltip = run?.reason ?? undefined;
    }
    actionItem.show();
    stateItem.show();
  };
  render();

  const base = await editorBase();
  setNt4Base(base);
  const classroom = new Classroom(base);
  context.subscriptions.push(...help.start(classroom), ...look.start(classroom));
  const output = new RunTerminal('Robot run');
  const problems = vscode.languages.createDiagnosticCollection('robot-run');
  const telemetry = new Telemetry();
  const simulator = new SimulatorView(telemetry);
  const driverStation = new DriverStation(base, telemetry, context.globalState);
  context.subscriptions.push(output, problems, simulator, driverStation, vscode.window.registerTreeDataProvider('classroom.simulator', simulator));

  /** The run whose output is shown, how much of it was received, and how its follower is stopped. */
  let shown: { id: string; received: number; text: string; stop: AbortController } | undefined;
  let warnedFor: string | null = null;
  /** The stop already told (its time), so that it is told once. */
  let toldStop: string | null = null;
  /** How full the home was last told (nearly full, full, not measurable), so that each is told once. */
  let toldDisk = 'ok';

  const root = vscode.workspace.workspaceFolders?.[0]?.uri;
  const lessons = new LessonNotices(context.globalState, root);
  const showProblems = (text: string) => {
    problems.clear();
    if (!root) return;
    const byFile = new Map<string, vscode.Diagnostic[]>();
    for (const problem of parseProblems(text)) {
      const file = projectPath(problem.file, root.path);
      if (file === undefined) continue;
      const range = new vscode.Range(problem.line - 1, problem.column - 1, problem.line - 1, Number.MAX_SAFE_INTEGER);
      const diagnostic = new vscode.Diagnostic(
        range,
        problem.message,
        problem.severity === 'error' ? vscode.DiagnosticSeverity.Error : vscode.DiagnosticSeverity.Warning,
      );
      diagnostic.source = 'javac';
      byFile.set(file, [...(byFile.get(file) ?? []), diagnostic]);
    }
    for (const [file, diagnostics] of byFile) problems.set(vscode.Uri.joinPath(root, file), diagnostics);
  };

  /** Shows a run's output in the terminal: from its start when it is a new one, live until it ends (reconnecting as needed). */
  const follow = (run: RunView) => {
    if (shown?.id === run.id) return;
    shown?.stop.abort();
    const current = { id: run.id, received: 0, text: '', stop: new AbortController() };
    shown = current;
    output.clear();
    problems.clear();
    output.appendLine(`▶ Run of ${new Date(run.queuedAt).toLocaleTimeString()}: compiling and starting your robot code…`);
    void (async () => {
      let problemsAt = 0;
      while (!current.stop.signal.aborted) {
        try {
          const end = await classroom.follow(
            run.id,
            current.received,
            (offset, text) => {
              // A piece past what was received (never expected): this connection lost some, read again from there.
              if (offset > current.received) throw new Error(`output from ${offset} after ${current.received}`);
              const fresh = text.slice(Math.max(0, current.received - offset));
              current.received = offset + text.length;
              current.text += fresh;
              output.append(fresh);
              // Problems as they appear, for whole lines only.
              const complete = current.text.lastIndexOf('\n');
              if (complete > problemsAt) {
                problemsAt = complete;
                showProblems(current.text.slice(0, complete));
              }
            },
            current.stop.signal,
          );
          showProblems(current.text);
          // The exit code, unless the reason says it already ("compile or boot failed (exit code 1)").
          const code = end.exitCode !== null && !end.reason?.includes(`exit code ${end.exitCode}`) ? ` (exit code ${end.exitCode})` : '';
          output.appendLine(`\n■ Run ${end.status}${end.reason ? `: ${end.reason}` : ''}${code}.`);
          void refresh();
          return;
        } catch (error) {
          if (current.stop.signal.aborted) return;
          // Connection lost (a restarting control plane, a slow reader cut): go on from what was received;
          // refused (too many output streams open), after the wait it was told.
          const wait = error instanceof ApiError && error.retryAfterSeconds !== undefined ? error.retryAfterSeconds * 1000 : 1000;
          await new Promise((resolve) => setTimeout(resolve, wait));
        }
      }
    })();
  };

  const warnIfIdle = async () => {
    const idle = workspace?.idle;
    if (!idle?.stopsAt || !idle.warnFrom) return;
    const now = Date.now();
    if (now < Date.parse(idle.warnFrom) || warnedFor === idle.stopsAt) return;
    warnedFor = idle.stopsAt;
    const minutes = Math.max(1, Math.round((Date.parse(idle.stopsAt) - now) / 60_000));
    const choice = await vscode.window.showWarningMessage(
      `Your workspace will be stopped in about ${minutes} minute${minutes === 1 ? '' : 's'} because nothing has happened in it. Your files are kept.`,
      'Keep working',
    );
    if (choice !== 'Keep working') return;
    workspace = await classroom.keep();
    render();
    void vscode.window.showInformationMessage('Your workspace keeps running.');
  };

  // The home nearly full, full or not measurable in full: said once each time it becomes so (Run is refused at full).
  const tellDisk = () => {
    const disk = workspace?.disk;
    const level = disk?.message ? disk.level : 'ok';
    if (level === toldDisk) return;
    toldDisk = level;
    if (disk?.message) void vscode.window.showWarningMessage(disk.message);
  };

  // VS Code's own connection cannot come back to an editor that stopped or was replaced, nor to a
  // signed-out browser (the control plane ends its tunnels), and its "Disconnected. Attempting to
  // reconnect…" dialog, shown 40 s after the connection went, covers every other dialog until the
  // window reloads. So the classroom tells at once why, and the window reloads by itself onto the
  // way on, which the control plane serves at this very address: the workspace page (who stopped it,
  // Open, and back into the editor by itself once it runs), the new editor, or the sign-in page
  // (which returns here).
  let leaving = false;
  const reload = () => {
    if (leaving) return;
    leaving = true;
    void vscode.commands.executeCommand('workbench.action.reloadWindow');
  };
  /** The editor this window was opened on was seen gone after a stop. */
  let editorGone = false;
  /** When the stop's dialog was shown (0: not yet), and whether the student asked for the workspace page. */
  let stopToldAt = 0;
  let pageAsked = false;
  const reloadIfGone = () => {
    if (!workspace) return;
    if (workspace.desiredState === 'running') {
      // Opened again after a stop seen here, and answering: back into the new editor. A workspace
      // wanted running all along keeps this window whatever a read said meanwhile (a control plane
      // restarting or upgraded, its probe not answered yet): VS Code reconnects by itself.
      if (workspace.ready && editorGone) reload();
      return;
    }
    // Stopped: its editor answers until its container stops, and this address is still the editor's.
    if (workspace.ready) return;
    editorGone = true;
    // Its editor gone: the workspace page, once the stop's dialog has been read or passed over.
    const read = pageAsked || !workspace.stopped || (stopToldAt > 0 && Date.now() - stopToldAt >= STOP_SHOWN_MS);
    if (read) reload();
  };

  // The editor stops with the workspace: say so at once, with why, while the editor goes (its
  // container stops in seconds); then the window goes to the workspace page by itself.
  const tellStopped = async () => {
    const stopped = workspace?.desiredState !== 'running' ? workspace?.stopped : null;
    if (!stopped || toldStop === stopped.at) return;
    toldStop = stopped.at;
    stopToldAt = Date.now();
    const choice = await vscode.window.showWarningMessage(
      stoppedText(stopped),
      { modal: true, detail: 'Your files are kept. This window goes to your workspace page as soon as your editor has stopped; Open there starts it again.' },
      'Open my workspace page',
    );
    if (choice !== 'Open my workspace page') return;
    pageAsked = true;
    reloadIfGone();
  };

  // Signed out (another tab's Sign out, or the session ended): said at once, with the way back. Left
  // alone, the window goes to the sign-in page itself before VS Code's dialog would cover the notice.
  let signedOutLeave: ReturnType<typeof setTimeout> | undefined;
  const tellSignedOut = async () => {
    if (signedOut) return;
    signedOut = true;
    render();
    signedOutLeave = setTimeout(reload, SIGNED_OUT_LEAVE_MS);
    const choice = await vscode.window.showWarningMessage(
      'You are signed out.',
      {
        modal: true,
        detail:
          'You signed out in another tab, or your session ended. Your files are kept. Sign in again to come back to this editor; left alone, this window goes to the sign-in page in half a minute.',
      },
      'Sign in again',
    );
    if (choice === 'Sign in again') reload();
  };

  const refresh = async () => {
    try {
      workspace = await classroom.workspace();
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) void tellSignedOut();
      return;
    }
    if (signedOut) {
      // Signed in again (in another tab): VS Code's connection comes back by itself.
      signedOut = false;
      clearTimeout(signedOutLeave);
    }
    const run = workspace.run;
    // A run not shown yet (started here, elsewhere, or before this window opened): its output, from its start.
    if (run && shown?.id !== run.id) follow(run);
    if (run?.status === 'running') simulator.connect();
    else simulator.disconnected(isActive(run) ? 'The simulator is starting…' : 'No simulator: press Run.');
    driverStation.setRun(run);
    render();
    void warnIfIdle();
    tellDisk();
    look.show(workspace.lookedAt ?? null);
    lessons.show(workspace.lessons ?? []);
    reloadIfGone();
    void tellStopped();
  };

  // The student is working here: told to the control plane at most once a minute (its idle sweep
  // does not count the editor's own traffic, which flows whether anyone is there or not).
  let lastActivity = 0;
  const active = () => {
    if (Date.now() - lastActivity < ACTIVITY_EVERY_MS) return;
    lastActivity = Date.now();
    void classroom.keep().then(
      (fresh) => (workspace = fresh),
      () => undefined,
    );
  };
  // VS Code's own view of it: the window is focused and was interacted with recently (typing in the
  // terminal, scrolling, clicking), looked at every minute.
  const looking = setInterval(() => vscode.window.state.focused && vscode.window.state.active && active(), ACTIVITY_EVERY_MS);
  context.subscriptions.push({ dispose: () => clearInterval(looking) });

  context.subscriptions.push(
    vscode.commands.registerCommand('classroom.run', async () => {
      try {
        const run = await classroom.run();
        // (A poll during the request may already follow this run: one follower at a time.)
        follow(run);
        output.show(true);
      } catch (error) {
        if (error instanceof ApiError && error.code === 'run_active') {
          const choice = await vscode.window.showWarningMessage('A run is already going. Stop it first?', 'Stop it');
          if (choice === 'Stop it') await vscode.commands.executeCommand('classroom.stop');
        } else void vscode.window.showErrorMessage(error instanceof Error ? error.message : String(error));
      }
      await refresh();
    }),
    vscode.commands.registerCommand('classroom.stop', async () => {
      const run = workspace?.run;
      if (!isActive(run)) return void vscode.window.showInformationMessage('No run is going.');
      try {
        await classroom.stop(run.id);
      } catch (error) {
        void vscode.window.showErrorMessage(error instanceof Error ? error.message : String(error));
      }
      await refresh();
    }),
    vscode.commands.registerCommand('classroom.showOutput', () => output.show(true)),
    // Through the control plane's sign-in, which returns to this editor.
    vscode.commands.registerCommand('classroom.signIn', reload),
    vscode.commands.registerCommand('classroom.openDriverStation', () => driverStation.open()),
    vscode.commands.registerCommand('classroom.openPage', async () => {
      const target = workspace?.pageUrl ?? new URL('.cp/', base).href;
      await vscode.env.openExternal(vscode.Uri.parse(target));
    }),
    vscode.commands.registerCommand('classroom.keepWorking', async () => {
      workspace = await classroom.keep();
      render();
    }),
    vscode.workspace.onDidChangeTextDocument((event) => event.document.uri.scheme !== 'output' && active()),
    vscode.window.onDidChangeActiveTextEditor(active),
    vscode.window.onDidChangeTextEditorSelection(active),
    vscode.window.onDidChangeWindowState((state) => state.focused && state.active && active()),
  );
  render();
  await refresh();
  const poll = setInterval(() => void refresh(), POLL_MS);
  context.subscriptions.push({ dispose: () => (clearInterval(poll), shown?.stop.abort()) });
}

export function deactivate(): void {}
