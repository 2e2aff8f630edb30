/** Jest's setupFilesAfterEnv: every test file's local answers are checked against the API's contract (contract.ts). */
import { checkEveryAnswer } from './contract.ts';

checkEveryAnswer();
