const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `id` is a UUID (the form of every user, workspace and run id); other text never reaches a uuid column. */
export const isUuid = (id: string): boolean => UUID.test(id);
