/**
 * Lessons, handed out to students' homes and collected from them (tables `lessons`,
 * `lesson_versions`, `lesson_deliveries`, `lesson_collections`, `lesson_snapshots`). A coach makes a
 * lesson (audit `lesson.create`), whose files are version 1; each later upload of its files is the
 * next version (audited the same, naming it). Handing it out (audit `lesson.handout`) wants its
 * latest version in each chosen student's home: one delivery per student and version, `pending`
 * until the leader's lesson controller has put it under `lessons/` (controllers/lessons.ts), then
 * `delivered` with the folder it landed in and the home volume it went to. A reset (audit
 * `lesson.reset`) asks the controller to make a student's folder of the lesson the handed-out files
 * again, after a backup of their home. A collection (audit `lesson.collect`) is due at once or at a
 * deadline; when it is due, the controller takes a snapshot of each student's folders of the
 * lesson. Each change is announced as a `lessons` change naming the workspace (or the lesson, for
 * one that is not any one workspace's), which wakes the controller and every open panel.
 */
import type { DataSource } from 'typeorm';
import { ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import type { Actor } from './audit.ts';
import { isUuid } from './ids.ts';
import type { Mutate, Tx } from './mutation.ts';
import { col, rowCodec, type RowOf } from './row-codec.ts';

/** Where a delivery stands: `pending` (wanted, not there yet), `delivered`, `failed` (with why; tried again at the next handout or reset). */
export const DELIVERY_STATES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

/** How one student's snapshot of a collection went: `pending`, `taken`, `missing` (no folder of the lesson in their home), `failed` (with why). */
export const SNAPSHOT_STATES = ['pending', 'taken', 'missing', 'failed'] as const;
export type SnapshotState = (typeof SNAPSHOT_STATES)[number];

/** A lesson's name: its folder under `lessons/`: a letter or digit first, then letters, digits, spaces, `.`, `_`, `-`; at most 60. */
export const LESSON_NAME = /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,59}$/;

/** How many attempts a delivery gets before it is `failed` (each after a backoff of the controller's queue). */
export const DELIVERY_ATTEMPTS = 5;

/** What a version of a lesson holds. */
export interface LessonContent {
  files: number;
  sizeBytes: number;
  sha256: string;
}

/** A version of a lesson, as listed. */
export interface LessonVersion extends LessonContent {
  version: number;
  createdBy: string;
  createdAt: Date;
}

/** A lesson as listed: its latest version and how its handouts stand. */
export interface LessonRecord {
  id: string;
  name: string;
  createdBy: string;
  createdAt: Date;
  latest: LessonVersion;
  deliveries: Record<DeliveryState, number>;
}

/** One student's delivery of one version. */
export interface DeliveryRecord {
  lessonId: string;
  lessonName: string;
  workspaceId: string;
  slug: string;
  version: number;
  state: DeliveryState;
  /** The folder under `lessons/` it landed in (chosen before it is written), or null before. */
  folder: string | null;
  /** The home volume it was written to. */
  volume: string | null;
  message: string;
  attempts: number;
  requestedAt: Date;
  deliveredAt: Date | null;
  /** A reset asked and not done yet. */
  resetRequestedAt: Date | null;
  /** The backup made before the last reset. */
  resetBackup: string | null;
  resetAt: Date | null;
}

/** A collection of a lesson, with how its snapshots stand. */
export interface CollectionRecord {
  id: string;
  lessonId: string;
  requestedBy: string;
  requestedAt: Date;
  dueAt: Date;
  doneAt: Date | null;
  snapshots: SnapshotRecord[];
}

/** One student's snapshot in a collection. */
export interface SnapshotRecord {
  workspaceId: string;
  slug: string;
  state: SnapshotState;
  folders: string[];
  files: number;
  sizeBytes: number;
  message: string;
  takenAt: Date | null;
}

/** A lesson with its versions, every student's deliveries and its collections. */
export interface LessonDetail extends LessonRecord {
  versions: LessonVersion[];
  students: DeliveryRecord[];
  collections: CollectionRecord[];
}

const VERSION = rowCodec(
  'lesson_versions',
  { version: col.integer, files: col.integer, size_bytes: col.bigint, sha256: col.text, created_by: col.text, created_at: col.timestamp },
  (row): LessonVersion => ({
    version: row.version,
    files: row.files,
    sizeBytes: row.size_bytes,
    sha256: row.sha256,
    createdBy: row.created_by,
    createdAt: row.created_at,
  }),
);

const LESSON = rowCodec(
  'lessons',
  {
    id: col.text,
    name: col.text,
    created_by: col.text,
    created_at: col.timestamp,
    version: col.integer,
    files: col.integer,
    size_bytes: col.bigint,
    sha256: col.text,
    version_by: col.text,
    version_at: col.timestamp,
    pending: col.bigint,
    delivered: col.bigint,
    failed: col.bigint,
  },
  (row): LessonRecord => ({
    id: row.id,
    name: row.name,
    createdBy: row.created_by,
    createdAt: row.created_at,
    latest: { version: row.version, files: row.files, sizeBytes: row.size_bytes, sha256: row.sha256, createdBy: row.version_by, createdAt: row.version_at },
    deliveries: { pending: row.pending, delivered: row.delivered, failed: row.failed },
  }),
);

const SELECT_LESSONS = `SELECT l.id, l.name, l.created_by, l.created_at, v.version, v.files, v.size_bytes, v.sha256,
    v.created_by AS version_by, v.created_at AS version_at,
    (SELECT count(*) FROM lesson_deliveries d WHERE d.lesson_id = l.id AND d.state = 'pending') AS pending,
    (SELECT count(*) FROM lesson_deliveries d WHERE d.lesson_id = l.id AND d.state = 'delivered') AS delivered,
    (SELECT count(*) FROM lesson_deliveries d WHERE d.lesson_id = l.id AND d.state = 'failed') AS failed
  FROM lessons l
  JOIN LATERAL (SELECT * FROM lesson_versions WHERE lesson_id = l.id ORDER BY version DESC LIMIT 1) v ON true`;

const DELIVERY = rowCodec(
  'lesson_deliveries',
  {
    lesson_id: col.text,
    lesson_name: col.text,
    workspace_id: col.text,
    slug: col.text,
    version: col.integer,
    state: col.oneOf(DELIVERY_STATES),
    folder: col.nullable(col.text),
    volume: col.nullable(col.text),
    message: col.text,
    attempts: col.integer,
    requested_at: col.timestamp,
    delivered_at: col.nullable(col.timestamp),
    reset_requested_at: col.nullable(col.timestamp),
    reset_backup: col.nullable(col.text),
    reset_at: col.nullable(col.timestamp),
  },
  (row): DeliveryRecord => ({
    lessonId: row.lesson_id,
    lessonName: row.lesson_name,
    workspaceId: row.workspace_id,
    slug: row.slug,
    version: row.version,
    state: row.state,
    folder: row.folder,
    volume: row.volume,
    message: row.message,
    attempts: row.attempts,
    requestedAt: row.requested_at,
    deliveredAt: row.delivered_at,
    resetRequestedAt: row.reset_requested_at,
    resetBackup: row.reset_backup,
    resetAt: row.reset_at,
  }),
);

const SELECT_DELIVERIES = `SELECT d.lesson_id, l.name AS lesson_name, d.workspace_id, w.slug, d.version, d.state, d.folder, d.volume, d.message,
    d.attempts, d.requested_at, d.delivered_at, d.reset_requested_at, d.reset_backup, d.reset_at
  FROM lesson_deliveries d JOIN lessons l ON l.id = d.lesson_id JOIN workspaces w ON w.id = d.workspace_id`;

const COLLECTION = rowCodec(
  'lesson_collections',
  { id: col.text, lesson_id: col.text, requested_by: col.text, requested_at: col.timestamp, due_at: col.timestamp, done_at: col.nullable(col.timestamp) },
  (row): Omit<CollectionRecord, 'snapshots'> => ({
    id: row.id,
    lessonId: row.lesson_id,
    requestedBy: row.requested_by,
    requestedAt: row.requested_at,
    dueAt: row.due_at,
    doneAt: row.done_at,
  }),
);

const SNAPSHOT_COLUMNS = {
  collection_id: col.text,
  workspace_id: col.text,
  slug: col.text,
  state: col.oneOf(SNAPSHOT_STATES),
  folders: col.textArray,
  files: col.integer,
  size_bytes: col.bigint,
  message: col.text,
  taken_at: col.nullable(col.timestamp),
};

const toSnapshot = (row: RowOf<typeof SNAPSHOT_COLUMNS>): SnapshotRecord & { collectionId: string } => ({
  collectionId: row.collection_id,
  workspaceId: row.workspace_id,
  slug: row.slug,
  state: row.state,
  folders: row.folders,
  files: row.files,
  sizeBytes: row.size_bytes,
  message: row.message,
  takenAt: row.taken_at,
});

const SNAPSHOT = rowCodec('lesson_snapshots', SNAPSHOT_COLUMNS, toSnapshot);
const DUE_SNAPSHOT = rowCodec('lesson_snapshots', { ...SNAPSHOT_COLUMNS, lesson_id: col.text }, (row) => ({ ...toSnapshot(row), lessonId: row.lesson_id }));

const IDS = rowCodec('lessons', { id: col.text });
const WORKSPACE_IDS = rowCodec('lesson_deliveries', { workspace_id: col.text });
const NUMBER = rowCodec('lesson_versions', { version: col.integer });

const lessonGone = () => NotFoundError('lesson_not_found', 'No such lesson.');
const collectionGone = () => NotFoundError('collection_not_found', 'No such collection of this lesson.');
const lessonChange = (id: string) => ({ kind: 'lessons' as const, id });

/** Who a handout goes to: every student, or the students of these workspaces. */
export type HandoutTargets = { all: true } | { workspaceIds: string[] };

/** The lessons (see the file comment). */
export class LessonStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;

  constructor(db: DataSource, mutate: Mutate) {
    this.db = db;
    this.mutate = mutate;
  }

  /** Every lesson, by name. */
  list(): Promise<LessonRecord[]> {
    return LESSON.all(this.db, `${SELECT_LESSONS} ORDER BY l.name`);
  }

  /** One lesson (404 `lesson_not_found`). */
  async get(lessonId: string): Promise<LessonRecord> {
    if (!isUuid(lessonId)) throw lessonGone();
    const lesson = await LESSON.first(this.db, `${SELECT_LESSONS} WHERE l.id = $1`, [lessonId]);
    if (!lesson) throw lessonGone();
    return lesson;
  }

  /**
   * The lesson an operator names (the CLI): its id, or its name whatever its letters' case; 404
   * `lesson_not_found` naming what was given otherwise.
   */
  async resolve(nameOrId: string): Promise<LessonRecord> {
    const text = nameOrId.trim();
    const lesson =
      (isUuid(text) ? await LESSON.first(this.db, `${SELECT_LESSONS} WHERE l.id = $1`, [text]) : undefined) ??
      (text.includes('\u0000') ? undefined : await LESSON.first(this.db, `${SELECT_LESSONS} WHERE lower(l.name) = lower($1)`, [text]));
    if (!lesson) throw NotFoundError('lesson_not_found', `No lesson ${JSON.stringify(nameOrId)} (give its name or id; "lessons list" lists them).`);
    return lesson;
  }

  /** A lesson with its versions, every delivery (by student, newest version first) and its collections (newest first). */
  async detail(lessonId: string): Promise<LessonDetail> {
    const lesson = await this.get(lessonId);
    const [versions, students, collections, snapshots] = await Promise.all([
      VERSION.all(this.db, `SELECT ${VERSION.columns} FROM lesson_versions WHERE lesson_id = $1 ORDER BY version DESC`, [lessonId]),
      DELIVERY.all(this.db, `${SELECT_DELIVERIES} WHERE d.lesson_id = $1 ORDER BY w.slug, d.version DESC`, [lessonId]),
      COLLECTION.all(this.db, `SELECT ${COLLECTION.columns} FROM lesson_collections WHERE lesson_id = $1 ORDER BY requested_at DESC`, [lessonId]),
      SNAPSHOT.all(
        this.db,
        `SELECT ${SNAPSHOT.columnsOf('s')} FROM lesson_snapshots s JOIN lesson_collections c ON c.id = s.collection_id WHERE c.lesson_id = $1 ORDER BY s.slug`,
        [lessonId],
      ),
    ]);
    return {
      ...lesson,
      versions,
      students,
      collections: collections.map((collection) => ({ ...collection, snapshots: snapshots.filter((each) => each.collectionId === collection.id) })),
    };
  }

  /**
   * Makes a lesson named `name` whose files (`content`, already stored by `store`, given the new
   * lesson's id) are its version 1 (audit `lesson.create`); 409 `lesson_exists` when one has that
   * name (whatever its letters' case), 400 `invalid_lesson_name` for a name that cannot be a folder.
   */
  async create(actor: Actor, name: string, content: LessonContent, store: (lessonId: string, version: number) => Promise<void>): Promise<LessonRecord> {
    if (!LESSON_NAME.test(name) || name.endsWith('.') || name.endsWith(' '))
      throw ValidationError(
        'invalid_lesson_name',
        'A lesson name is its folder: 1 to 60 letters, digits, spaces, dots, dashes or underscores, beginning with a letter or digit, not ending with a dot or space.',
      );
    const id = await this.mutate(async (tx) => {
      const taken = await IDS.first(tx, 'SELECT id FROM lessons WHERE lower(name) = lower($1)', [name]);
      if (taken) throw ConflictError('lesson_exists', `A lesson named ${name} exists: give it a new version, or choose another name.`);
      const row = await IDS.one(tx, 'INSERT INTO lessons (name, created_by) VALUES ($1, $2) RETURNING id', [name, actor.email]);
      await this.insertVersion(tx, row.id, 1, content, actor);
      await store(row.id, 1);
      return {
        value: row.id,
        changed: [lessonChange(row.id)],
        audit: { actor, action: 'lesson.create' as const, target: { kind: 'lesson', id: row.id }, metadata: { name, version: 1, ...content } },
      };
    });
    return this.get(id);
  }

  /** Adds the next version of a lesson's files (stored by `store`; audit `lesson.create` naming it); handed out, it lands beside the earlier one. */
  async addVersion(actor: Actor, lessonId: string, content: LessonContent, store: (lessonId: string, version: number) => Promise<void>): Promise<LessonRecord> {
    const lesson = await this.get(lessonId);
    await this.mutate(async (tx) => {
      await tx.query('SELECT id FROM lessons WHERE id = $1 FOR UPDATE', [lessonId]);
      const { version } = await NUMBER.one(tx, 'SELECT max(version) + 1 AS version FROM lesson_versions WHERE lesson_id = $1', [lessonId]);
      await this.insertVersion(tx, lessonId, version, content, actor);
      await store(lessonId, version);
      return {
        value: version,
        changed: [lessonChange(lessonId)],
        audit: { actor, action: 'lesson.create' as const, target: { kind: 'lesson', id: lessonId }, metadata: { name: lesson.name, version, ...content } },
      };
    });
    return this.get(lessonId);
  }

  /**
   * Hands the lesson's latest version out (audit `lesson.handout`, naming the version and how many
   * students): to every student (users whose role is `user`), or to the named workspaces (404
   * `workspace_not_found` for one that is not). A student who has that version already (or has it
   * on its way) is left as they are; one whose delivery failed is tried again. Answers how many
   * deliveries it asked for.
   */
  async handout(actor: Actor, lessonId: string, targets: HandoutTargets): Promise<{ version: number; students: number }> {
    const lesson = await this.get(lessonId);
    if (!('all' in targets) && targets.workspaceIds.some((id) => !isUuid(id))) throw NotFoundError('workspace_not_found', 'No such workspace.');
    return this.mutate(async (tx) => {
      const chosen =
        'all' in targets
          ? `SELECT w.id FROM workspaces w JOIN users u ON u.id = w.user_id WHERE u.role = 'user' AND w.desired_state <> 'deleted'`
          : `SELECT w.id FROM workspaces w WHERE w.id = ANY($4::uuid[]) AND w.desired_state <> 'deleted'`;
      if (!('all' in targets)) {
        const found = await WORKSPACE_IDS.all(tx, `SELECT id AS workspace_id FROM workspaces WHERE id = ANY($1::uuid[]) AND desired_state <> 'deleted'`, [
          targets.workspaceIds,
        ]);
        if (found.length !== new Set(targets.workspaceIds).size) throw NotFoundError('workspace_not_found', 'No such workspace.');
      }
      const asked = await WORKSPACE_IDS.all(
        tx,
        `INSERT INTO lesson_deliveries (lesson_id, workspace_id, version, requested_by)
          SELECT $1::uuid, c.id, $2::integer, $3 FROM (${chosen}) c
          ON CONFLICT (lesson_id, workspace_id, version) DO UPDATE SET state = 'pending', attempts = 0, message = '', requested_at = now()
            WHERE lesson_deliveries.state = 'failed'
          RETURNING workspace_id`,
        'all' in targets ? [lessonId, lesson.latest.version, actor.email] : [lessonId, lesson.latest.version, actor.email, targets.workspaceIds],
      );
      return {
        value: { version: lesson.latest.version, students: asked.length },
        changed: [lessonChange(lessonId), ...asked.map((row) => lessonChange(row.workspace_id))],
        audit: {
          actor,
          action: 'lesson.handout' as const,
          target: { kind: 'lesson', id: lessonId },
          metadata: { name: lesson.name, version: lesson.latest.version, students: asked.length, all: 'all' in targets },
        },
      };
    });
  }

  /**
   * Asks that a student's folder of the lesson be the handed-out files again (their latest version
   * delivered), after a backup of their home (audit `lesson.reset`): 409 `lesson_not_delivered`
   * when none of the lesson's versions has reached them.
   */
  async requestReset(actor: Actor, lessonId: string, workspace: { id: string; slug: string }): Promise<DeliveryRecord> {
    const lesson = await this.get(lessonId);
    const version = await this.mutate(async (tx) => {
      const row = await NUMBER.first(
        tx,
        `UPDATE lesson_deliveries SET reset_requested_at = now(), reset_requested_by = $3, attempts = 0, message = ''
          WHERE (lesson_id, workspace_id, version) = (SELECT lesson_id, workspace_id, max(version) FROM lesson_deliveries
            WHERE lesson_id = $1 AND workspace_id = $2 AND state = 'delivered' GROUP BY lesson_id, workspace_id)
          RETURNING version`,
        [lessonId, workspace.id, actor.email],
      );
      if (!row) throw ConflictError('lesson_not_delivered', `${lesson.name} has not reached ${workspace.slug}'s home: hand it out first.`);
      return {
        value: row.version,
        changed: [lessonChange(workspace.id), lessonChange(lessonId)],
        audit: {
          actor,
          action: 'lesson.reset' as const,
          target: { kind: 'workspace', id: workspace.id },
          metadata: { slug: workspace.slug, lesson: lesson.name, lessonId, version: row.version },
        },
      };
    });
    return DELIVERY.one(this.db, `${SELECT_DELIVERIES} WHERE d.lesson_id = $1 AND d.workspace_id = $2 AND d.version = $3`, [lessonId, workspace.id, version]);
  }

  /** Asks for a collection of the lesson, due at once or at `dueAt` (audit `lesson.collect`); its snapshots are taken by the controller when it is due. */
  async collect(actor: Actor, lessonId: string, dueAt: Date | undefined): Promise<CollectionRecord> {
    const lesson = await this.get(lessonId);
    const id = await this.mutate(async (tx) => {
      const row = await IDS.one(tx, 'INSERT INTO lesson_collections (lesson_id, requested_by, due_at) VALUES ($1, $2, coalesce($3, now())) RETURNING id', [
        lessonId,
        actor.email,
        dueAt ?? null,
      ]);
      return {
        value: row.id,
        changed: [lessonChange(lessonId)],
        audit: {
          actor,
          action: 'lesson.collect' as const,
          target: { kind: 'lesson', id: lessonId },
          metadata: { name: lesson.name, collectionId: row.id, ...(dueAt && { dueAt: dueAt.toISOString() }) },
        },
      };
    });
    return this.collection(lessonId, id);
  }

  /** One collection of a lesson, with its snapshots (404 `collection_not_found`). */
  async collection(lessonId: string, collectionId: string): Promise<CollectionRecord> {
    if (!isUuid(collectionId) || !isUuid(lessonId)) throw collectionGone();
    const collection = await COLLECTION.first(this.db, `SELECT ${COLLECTION.columns} FROM lesson_collections WHERE id = $1 AND lesson_id = $2`, [
      collectionId,
      lessonId,
    ]);
    if (!collection) throw collectionGone();
    const snapshots = await SNAPSHOT.all(this.db, `SELECT ${SNAPSHOT.columns} FROM lesson_snapshots WHERE collection_id = $1 ORDER BY slug`, [collectionId]);
    return { ...collection, snapshots };
  }

  /** What has reached a student's home: each delivered lesson version, newest first (their page and editor say where a new one landed). */
  delivered(workspaceId: string): Promise<DeliveryRecord[]> {
    return DELIVERY.all(this.db, `${SELECT_DELIVERIES} WHERE d.workspace_id = $1 AND d.state = 'delivered' ORDER BY d.delivered_at DESC`, [workspaceId]);
  }

  // The controller's side.

  /** Whether an id (of a `lessons` change) is a lesson's, not a workspace's. */
  async isLesson(id: string): Promise<boolean> {
    return isUuid(id) && (await IDS.first(this.db, 'SELECT id FROM lessons WHERE id = $1', [id])) !== undefined;
  }

  /** Workspaces with work: a delivery pending, a reset asked, or a snapshot of a collection due (the controller's resync). */
  async workspacesWithWork(): Promise<string[]> {
    await this.openDueCollections();
    const rows = await WORKSPACE_IDS.all(
      this.db,
      `SELECT workspace_id FROM lesson_deliveries WHERE state = 'pending' OR reset_requested_at IS NOT NULL
        UNION SELECT workspace_id FROM lesson_snapshots WHERE state = 'pending'`,
    );
    return rows.map((row) => row.workspace_id);
  }

  /** Every delivery of a workspace (the controller compares each delivered one's volume with the home's). */
  deliveriesOf(workspaceId: string): Promise<DeliveryRecord[]> {
    return DELIVERY.all(this.db, `${SELECT_DELIVERIES} WHERE d.workspace_id = $1 ORDER BY d.lesson_id, d.version`, [workspaceId]);
  }

  /** Records the folder a delivery is about to be written to (so that a retry writes the same one). */
  async choose(delivery: DeliveryRecord, folder: string): Promise<void> {
    await this.write(delivery, 'folder = $4', [folder], false);
  }

  /** A delivery is in the home volume `volume` (a reset done too, with the backup made before it). */
  async markDelivered(delivery: DeliveryRecord, volume: string, reset?: { backup: string | null }): Promise<void> {
    await this.write(
      delivery,
      `state = 'delivered', volume = $4, message = '', attempts = 0, delivered_at = coalesce(delivered_at, now())${reset ? ', reset_requested_at = NULL, reset_backup = $5, reset_at = now()' : ''}`,
      reset ? [volume, reset.backup] : [volume],
    );
  }

  /** A delivery (or its reset) failed DELIVERY_ATTEMPTS times: `failed` with why (a reset asked is given up instead, its delivery kept). */
  async markFailed(delivery: DeliveryRecord, message: string): Promise<void> {
    await this.write(delivery, "state = CASE WHEN reset_requested_at IS NULL THEN 'failed' ELSE state END, reset_requested_at = NULL, message = $4", [
      message.slice(0, 500),
    ]);
  }

  /** Notes why an attempt failed, and counts it (tried again after the queue's backoff). */
  async noteAttempt(delivery: DeliveryRecord, message: string): Promise<void> {
    // Not announced: the change would wake the controller at once, past the queue's backoff.
    await this.write(delivery, 'message = $4, attempts = attempts + 1', [message.slice(0, 500)], false);
  }

  /** A delivered lesson's home volume changed (a restore, a reset, a move) and its folder is there: it now lives in `volume`. */
  async moved(delivery: DeliveryRecord, volume: string): Promise<void> {
    await this.write(delivery, 'volume = $4', [volume]);
  }

  /**
   * Makes each student's snapshot rows of the collections now due (once: a collection's rows are
   * made when it opens); one with nobody to collect from is done, and so is one whose snapshots are
   * all done (should its end have been missed).
   */
  private async openDueCollections(): Promise<void> {
    const ended = await IDS.all(
      this.db,
      `UPDATE lesson_collections c SET done_at = now() WHERE done_at IS NULL AND due_at <= now()
        AND EXISTS (SELECT 1 FROM lesson_snapshots s WHERE s.collection_id = c.id)
        AND NOT EXISTS (SELECT 1 FROM lesson_snapshots s WHERE s.collection_id = c.id AND s.state = 'pending') RETURNING lesson_id AS id`,
    );
    if (ended.length > 0) await this.mutate(async () => ({ value: undefined, changed: ended.map((row) => lessonChange(row.id)), audit: null }));
    const due = await COLLECTION.all(
      this.db,
      `SELECT ${COLLECTION.columns} FROM lesson_collections c WHERE done_at IS NULL AND due_at <= now()
        AND NOT EXISTS (SELECT 1 FROM lesson_snapshots s WHERE s.collection_id = c.id)`,
    );
    for (const collection of due)
      await this.mutate(async (tx) => {
        await tx.query(
          `INSERT INTO lesson_snapshots (collection_id, workspace_id, slug)
            SELECT DISTINCT $1::uuid, d.workspace_id, w.slug FROM lesson_deliveries d JOIN workspaces w ON w.id = d.workspace_id
              WHERE d.lesson_id = $2 AND d.state = 'delivered'
            ON CONFLICT DO NOTHING`,
          [collection.id, collection.lessonId],
        );
        await tx.query('UPDATE lesson_collections SET done_at = now() WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM lesson_snapshots WHERE collection_id = $1)', [
          collection.id,
        ]);
        return { value: undefined, changed: [lessonChange(collection.lessonId)], audit: null };
      });
  }

  /** The snapshots due of a workspace: its rows of open collections, with the lesson of each. */
  snapshotsDue(workspaceId: string): Promise<(SnapshotRecord & { collectionId: string; lessonId: string })[]> {
    return DUE_SNAPSHOT.all(
      this.db,
      `SELECT ${SNAPSHOT.columnsOf('s')}, c.lesson_id FROM lesson_snapshots s JOIN lesson_collections c ON c.id = s.collection_id
        WHERE s.workspace_id = $1 AND s.state = 'pending'`,
      [workspaceId],
    );
  }

  /** One student's snapshot is done (taken, missing or failed); its collection is done once none is pending. */
  async snapshotDone(
    snapshot: { collectionId: string; workspaceId: string; lessonId: string },
    outcome: { state: Exclude<SnapshotState, 'pending'>; folders?: string[]; files?: number; sizeBytes?: number; message?: string },
  ): Promise<void> {
    await this.mutate(async (tx) => {
      // One snapshot done at a time per collection: two done at once would each see the other still pending, and neither end it.
      await tx.query('SELECT id FROM lesson_collections WHERE id = $1 FOR UPDATE', [snapshot.collectionId]);
      await tx.query(
        `UPDATE lesson_snapshots SET state = $3, folders = $4, files = $5, size_bytes = $6, message = $7, taken_at = now()
          WHERE collection_id = $1 AND workspace_id = $2`,
        [
          snapshot.collectionId,
          snapshot.workspaceId,
          outcome.state,
          outcome.folders ?? [],
          outcome.files ?? 0,
          outcome.sizeBytes ?? 0,
          (outcome.message ?? '').slice(0, 500),
        ],
      );
      await tx.query(
        `UPDATE lesson_collections SET done_at = now() WHERE id = $1 AND done_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM lesson_snapshots WHERE collection_id = $1 AND state = 'pending')`,
        [snapshot.collectionId],
      );
      return { value: undefined, changed: [lessonChange(snapshot.lessonId)], audit: null };
    });
  }

  /** Sets `assignments` ($4 on) of one delivery, announcing it (unless `announce` is false) to the student's page, the panel and the controller. */
  private async write(delivery: DeliveryRecord, assignments: string, values: unknown[], announce = true): Promise<void> {
    await this.mutate(async (tx) => {
      await tx.query(`UPDATE lesson_deliveries SET ${assignments} WHERE lesson_id = $1 AND workspace_id = $2 AND version = $3`, [
        delivery.lessonId,
        delivery.workspaceId,
        delivery.version,
        ...values,
      ]);
      return { value: undefined, changed: announce ? [lessonChange(delivery.workspaceId), lessonChange(delivery.lessonId)] : [], audit: null };
    });
  }

  private async insertVersion(tx: Tx, lessonId: string, version: number, content: LessonContent, actor: Actor): Promise<void> {
    await tx.query('INSERT INTO lesson_versions (lesson_id, version, files, size_bytes, sha256, created_by) VALUES ($1, $2, $3, $4, $5, $6)', [
      lessonId,
      version,
      content.files,
      content.sizeBytes,
      content.sha256,
      actor.email,
    ]);
  }
}
