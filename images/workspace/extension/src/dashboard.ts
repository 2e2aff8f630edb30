/**
 * What dashboards read from a robot's NetworkTables 4, as WPILib publishes them (allwpilib
 * SendableChooser.java, Field2d.java, FieldObject2d.java), and the field they are drawn on. Pure:
 * the Driver Station's page draws what these give.
 *
 * - A SendableChooser is a table (`/SmartDashboard/<name>/`, or anywhere) whose `.type` is
 *   "String Chooser": `options` (string[]), `default`, `active` (what the robot uses) and `selected`
 *   (what a dashboard picked: the Driver Station publishes it).
 * - A Field2d is a table whose `.type` is "Field2d": one `double[]` per object, 3 numbers per pose
 *   (x and y in metres from the blue alliance's origin, the heading in degrees, counter-clockwise);
 *   `Robot` is the robot.
 */

/** A chooser's table as the Driver Station lists it. */
export interface ChooserView {
  /** The table, e.g. `/SmartDashboard/Auto choices`. */
  table: string;
  /** Its name (the table's last part). */
  name: string;
  options: string[];
  default: string | null;
  active: string | null;
  selected: string | null;
}

/** One pose on the field. */
export interface Pose {
  x: number;
  y: number;
  degrees: number;
}

/** An object of a Field2d: the robot, boxes (a few poses: game pieces, targets) or a line (a trajectory: many poses). */
export interface FieldObject {
  name: string;
  poses: Pose[];
  drawn: 'robot' | 'boxes' | 'line';
}

export interface FieldView {
  table: string;
  name: string;
  objects: FieldObject[];
}

/** More poses than this, or a name saying so, and an object is drawn as a line through them (a trajectory). */
export const LINE_FROM_POSES = 8;

/**
 * The field: FRC 2025's (Reefscape), 17.548 m by 8.052 m (WPILib's fieldImages, 2025-reefscape.json
 * `field-size`), drawn plain: its outline, the centre line, the alliance zones.
 */
export const FIELD = { name: '2025 field', lengthMeters: 17.548, widthMeters: 8.052 } as const;

/** The robot's footprint when the robot says none: 0.838 m by 0.686 m (33 by 27 in, Glass's default). */
export const ROBOT_SIZE = { lengthMeters: 0.838, widthMeters: 0.686 } as const;

/** The poses in a Field2d object's `double[]` (3 numbers each; what is left over is ignored). */
export function poses(value: unknown): Pose[] {
  if (!Array.isArray(value)) return [];
  const numbers = value.filter((each): each is number => typeof each === 'number' && Number.isFinite(each));
  if (numbers.length !== value.length) return [];
  const found: Pose[] = [];
  for (let i = 0; i + 2 < numbers.length; i += 3) found.push({ x: numbers[i]!, y: numbers[i + 1]!, degrees: numbers[i + 2]! });
  return found;
}

/** The tables of NetworkTables topics (`name` → value) whose `.type` is `type`, in name order. */
function tablesOfType(values: ReadonlyMap<string, unknown>, type: string): string[] {
  const tables: string[] = [];
  for (const [name, value] of values) if (name.endsWith('/.type') && value === type) tables.push(name.slice(0, -'/.type'.length));
  return tables.toSorted();
}

const lastPart = (table: string) => table.slice(table.lastIndexOf('/') + 1);
const text = (value: unknown) => (typeof value === 'string' ? value : null);

/** Every SendableChooser published. */
export function choosers(values: ReadonlyMap<string, unknown>): ChooserView[] {
  return tablesOfType(values, 'String Chooser').map((table) => {
    const options = values.get(`${table}/options`);
    return {
      table,
      name: text(values.get(`${table}/.name`)) || lastPart(table),
      options: Array.isArray(options) ? options.filter((option): option is string => typeof option === 'string') : [],
      default: text(values.get(`${table}/default`)),
      active: text(values.get(`${table}/active`)),
      selected: text(values.get(`${table}/selected`)),
    };
  });
}

/** Every Field2d published, with its objects (the robot first, then by name). */
export function fields(values: ReadonlyMap<string, unknown>): FieldView[] {
  return tablesOfType(values, 'Field2d').map((table) => {
    const objects: FieldObject[] = [];
    for (const [name, value] of values) {
      if (!name.startsWith(`${table}/`)) continue;
      const object = name.slice(table.length + 1);
      if (object.includes('/') || object.startsWith('.')) continue;
      const found = poses(value);
      if (found.length === 0) continue;
      const drawn = object === 'Robot' ? 'robot' : found.length > LINE_FROM_POSES || /traj|path/i.test(object) ? 'line' : 'boxes';
      objects.push({ name: object, poses: found, drawn });
    }
    objects.sort((a, b) => (a.drawn === 'robot' ? -1 : b.drawn === 'robot' ? 1 : a.name.localeCompare(b.name)));
    return { table, name: lastPart(table), objects };
  });
}

/** Field metres to a drawing's pixels: the field fitted in `width` by `height` within `margin`, +x right, +y up. */
export interface FieldTransform {
  /** Pixels per metre. */
  scale: number;
  /** A point of the field (metres) in the drawing (pixels). */
  toPixels: (x: number, y: number) => [number, number];
}

export function fieldTransform(width: number, height: number, margin: number): FieldTransform {
  const scale = Math.max(0, Math.min((width - 2 * margin) / FIELD.lengthMeters, (height - 2 * margin) / FIELD.widthMeters));
  const left = (width - FIELD.lengthMeters * scale) / 2;
  const top = (height - FIELD.widthMeters * scale) / 2;
  return { scale, toPixels: (x, y) => [left + x * scale, top + (FIELD.widthMeters - y) * scale] };
}

/** The corners of a footprint at `pose` (field metres): front left, front right, back right, back left. */
export function footprint(pose: Pose, size: { lengthMeters: number; widthMeters: number } = ROBOT_SIZE): [number, number][] {
  const radians = (pose.degrees * Math.PI) / 180;
  const cos = Math.cos(radians);
  const sin = Math.sin(radians);
  const l = size.lengthMeters / 2;
  const w = size.widthMeters / 2;
  return [
    [l, w],
    [l, -w],
    [-l, -w],
    [-l, w],
  ].map(([dx, dy]) => [pose.x + dx! * cos - dy! * sin, pose.y + dx! * sin + dy! * cos]);
}

/** A pose in words, for the page and for screen readers: "x 1.23 m, y 4.10 m, heading 45°". */
export function poseText(pose: Pose): string {
  const degrees = ((((pose.degrees + 180) % 360) + 360) % 360) - 180;
  return `x ${pose.x.toFixed(2)} m, y ${pose.y.toFixed(2)} m, heading ${Math.round(degrees)}°`;
}
