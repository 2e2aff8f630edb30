/**
 * What the Driver Station reads from the robot's NetworkTables (images/workspace/extension/src/dashboard.ts):
 * every SendableChooser and Field2d as WPILib publishes them, and the field drawn at its true size.
 */
import { choosers, FIELD, fieldTransform, fields, footprint, poses, poseText } from '../../images/workspace/extension/src/dashboard.ts';

const topics = (entries: Record<string, unknown>) => new Map(Object.entries(entries));

describe('choosers', () => {
  it('lists every table whose .type is "String Chooser", wherever it is, with its options, default, active and selected', () => {
    const found = choosers(
      topics({
        '/SmartDashboard/Auto choices/.type': 'String Chooser',
        '/SmartDashboard/Auto choices/.name': 'Auto choices',
        '/SmartDashboard/Auto choices/options': ['Drive forward', 'Spin'],
        '/SmartDashboard/Auto choices/default': 'Drive forward',
        '/SmartDashboard/Auto choices/active': 'Drive forward',
        '/Shuffleboard/Match/Start/.type': 'String Chooser',
        '/Shuffleboard/Match/Start/options': ['Left', 7, 'Right'],
        '/Shuffleboard/Match/Start/selected': 'Right',
        '/SmartDashboard/Field/.type': 'Field2d',
      }),
    );
    expect(found).toEqual([
      { table: '/Shuffleboard/Match/Start', name: 'Start', options: ['Left', 'Right'], default: null, active: null, selected: 'Right' },
      {
        table: '/SmartDashboard/Auto choices',
        name: 'Auto choices',
        options: ['Drive forward', 'Spin'],
        default: 'Drive forward',
        active: 'Drive forward',
        selected: null,
      },
    ]);
  });
});

describe('fields', () => {
  it("reads a Field2d's objects: the robot first, few poses as boxes, many or a trajectory's name as a line", () => {
    const trajectory = Array.from({ length: 30 }, (_, index) => [index * 0.1, 1, 0]).flat();
    const [field] = fields(
      topics({
        '/SmartDashboard/Field/.type': 'Field2d',
        '/SmartDashboard/Field/.controllable': false,
        '/SmartDashboard/Field/Robot': [1.5, 2.5, 90],
        '/SmartDashboard/Field/Coral': [3, 4, 0, 5, 6, 180],
        '/SmartDashboard/Field/Path': [1, 1, 0, 2, 2, 0],
        '/SmartDashboard/Field/Trajectory': trajectory,
        '/SmartDashboard/Field/Broken': [1, 'two', 3],
        '/SmartDashboard/Other': [1, 2, 3],
      }),
    );
    expect(field!.name).toBe('Field');
    expect(field!.objects.map((object) => [object.name, object.drawn, object.poses.length])).toEqual([
      ['Robot', 'robot', 1],
      ['Coral', 'boxes', 2],
      ['Path', 'line', 2],
      ['Trajectory', 'line', 30],
    ]);
    expect(field!.objects[0]!.poses).toEqual([{ x: 1.5, y: 2.5, degrees: 90 }]);
  });

  it('reads 3 numbers per pose and drops what is left over', () => {
    expect(poses([1, 2, 3, 4, 5])).toEqual([{ x: 1, y: 2, degrees: 3 }]);
    expect(poses('1,2,3')).toEqual([]);
  });
});

describe('the field drawn', () => {
  it('is the 2025 field at its true size, 17.548 m by 8.052 m', () => {
    expect([FIELD.lengthMeters, FIELD.widthMeters]).toEqual([17.548, 8.052]);
  });

  it('fits the field in the drawing with +x right and +y up, the origin at the bottom left, centred', () => {
    // Twice as wide as the field's ratio: the height decides, and the field is centred across.
    const transform = fieldTransform(1000, 300, 10);
    expect(transform.scale).toBeCloseTo(280 / 8.052, 9);
    const [left, bottom] = transform.toPixels(0, 0);
    const [right, top] = transform.toPixels(FIELD.lengthMeters, FIELD.widthMeters);
    expect(bottom).toBeCloseTo(290, 9);
    expect(top).toBeCloseTo(10, 9);
    expect(left + right).toBeCloseTo(1000, 9);
    expect(right - left).toBeCloseTo(FIELD.lengthMeters * transform.scale, 9);
  });

  it("turns the robot's footprint with its heading, counter-clockwise, around its centre", () => {
    const square = { lengthMeters: 2, widthMeters: 1 };
    const ahead = footprint({ x: 5, y: 5, degrees: 0 }, square);
    expect(ahead).toEqual([
      [6, 5.5],
      [6, 4.5],
      [4, 4.5],
      [4, 5.5],
    ]);
    // Facing +y: the front is up.
    const [frontLeft, frontRight] = footprint({ x: 5, y: 5, degrees: 90 }, square);
    expect(frontLeft![0]).toBeCloseTo(4.5, 9);
    expect(frontLeft![1]).toBeCloseTo(6, 9);
    expect(frontRight![0]).toBeCloseTo(5.5, 9);
    expect(frontRight![1]).toBeCloseTo(6, 9);
  });

  it('says a pose in words, the heading within -180..180', () => {
    expect(poseText({ x: 1.234, y: 4.1, degrees: 270 })).toBe('x 1.23 m, y 4.10 m, heading -90°');
    expect(poseText({ x: 0, y: 0, degrees: -540 })).toBe('x 0.00 m, y 0.00 m, heading -180°');
  });
});
